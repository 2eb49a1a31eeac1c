/*
 * gmprof: per-range GPU hardware metrics for CUDA programs, through NVIDIA CUPTI.
 *
 * The C interface of libgmprof.so. Every function returns a gmprof_status and never
 * unwinds or aborts; after a failure, gmprof_last_error() returns a message saying what
 * went wrong and how to fix it. Ranges are per thread: a kernel belongs to the innermost
 * open range of the thread that launched it.
 *
 *   gmprof_options opts = GMPROF_OPTIONS_INIT;
 *   opts.metrics = "dram__bytes_read.sum,dram__bytes_write.sum";
 *   opts.output_dir = "gmprof-out";
 *   if (gmprof_init(&opts) != GMPROF_OK) fprintf(stderr, "%s\n", gmprof_last_error());
 *   gmprof_push_range("step");  ...launch kernels...  gmprof_pop_range();
 *   gmprof_finish();   // writes ranges.csv, kernels.csv, transfers.csv, stats.csv,
 *                      // report.json and trace.json into output_dir
 *
 * Link with -lgmprof (libgmprof.so is built by `cargo build --release`).
 * This header is checked against the library's exports by the crate's tests.
 */
#ifndef GMPROF_H
#define GMPROF_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gmprof_status {
    GMPROF_OK = 0,
    GMPROF_ERROR_INVALID_ARGUMENT = 1,   /* NULL or non-UTF-8 string, unknown mode */
    GMPROF_ERROR_NOT_INITIALIZED = 2,    /* no gmprof_init, or called after gmprof_finish */
    GMPROF_ERROR_ALREADY_INITIALIZED = 3,
    GMPROF_ERROR_UNBALANCED = 4,         /* pop with no open range on this thread */
    GMPROF_ERROR_LIBRARY_NOT_FOUND = 5,  /* libcupti or libcuda could not be loaded */
    GMPROF_ERROR_CUPTI = 6,              /* a CUPTI call failed (privileges, busy GPU, ...) */
    GMPROF_ERROR_CUDA = 7,               /* a CUDA driver call failed (no device, ...) */
    GMPROF_ERROR_UNKNOWN_METRIC = 8,     /* a metric name the GPU does not know */
    GMPROF_ERROR_IO = 9,                 /* writing the outputs failed */
    GMPROF_ERROR_INTERNAL = 10           /* a bug in gmprof; the message says where */
} gmprof_status;

typedef struct gmprof_options {
    const char *mode;        /* "per_kernel", "per_range", "kernel_replay" or "trace"; NULL: $GMPROF_MODE,
                                else per_kernel for a one-pass metric set, kernel_replay otherwise */
    const char *metrics;     /* comma-separated; NULL: $GMPROF_METRICS or DRAM bytes read/written */
    const char *output_dir;  /* where gmprof_finish writes; NULL: $GMPROF_OUT or "gmprof-out". Each
                                process writes into its own directory of it (README "Several
                                processes"): DIR/<host>-<rank>/ under a rank variable, DIR/ itself
                                otherwise unless it already holds results */
    int device;              /* CUDA device ordinal; -1: the current context, or device 0 */
    int synchronize_on_pop;  /* nonzero: wait for the GPU before each range closes */
} gmprof_options;

/* Defaults for every field. */
#define GMPROF_OPTIONS_INIT { 0, 0, 0, -1, 0 }

/* Starts the process-wide profiler. options may be NULL (defaults and environment).
   GMPROF_RANGE_SCOPE=process attributes work of threads with no open range to the latest
   range open on any thread (for frameworks that launch from helper threads), and nests the
   first range such a thread pushes under that range.
   GMPROF_PM_SAMPLING=default (or comma-separated PM-sampling metric names) also samples PM
   counters at a fixed interval, GMPROF_PM_INTERVAL (ns, e.g. 20000 or 20us, or 30000cycles;
   default 100us), and folds them into every range and kernel: pm.csv and the "pm" section of
   report.json. An add-on to mode "trace"; beside a counter mode gmprof_init fails with
   GMPROF_ERROR_INVALID_ARGUMENT if CUPTI does not let both hold the counters.
   GMPROF_PC_SAMPLING=1 (every 2^13 cycles) or N (every 2^N cycles, 5 to 31) also samples warp
   program counters and their stall reasons (CUPTI's PC sampling, kernels not serialized):
   stalls.csv, pc_samples.csv and the "pc" section of report.json. Like PM sampling it comes
   through the environment, which keeps gmprof_options' layout unchanged; a bad value, a
   counter mode beside it or a refusal by CUPTI fails gmprof_init with
   GMPROF_ERROR_INVALID_ARGUMENT. */
gmprof_status gmprof_init(const gmprof_options *options);

/* Opens a range named name (UTF-8) on the calling thread. */
gmprof_status gmprof_push_range(const char *name);

/* Closes the calling thread's innermost range. */
gmprof_status gmprof_pop_range(void);

/* Stops profiling and writes the outputs into the output directory. */
gmprof_status gmprof_finish(void);

/* The message of the calling thread's last failure, "" if none. Valid until the next
   gmprof call on this thread. */
const char *gmprof_last_error(void);

/* The library version, e.g. "0.1.0". */
const char *gmprof_version(void);

/* The directory this process writes into: output_dir itself, or its per-process
   subdirectory (DIR/<host>-<rank>/ under a rank variable). "" before gmprof_init; valid
   until the next gmprof_init. */
const char *gmprof_output_dir(void);

/* ---- Captures: profile a window the program chooses ----
   Under `gmprof run --on-demand` (or --capture-range) the program starts idle, and a capture
   is the run's next DIR/capture-K/<process>/, as one `gmprof capture` asks for; elsewhere it is
   a session of its own (as gmprof_init's) written to output_dir/capture-K/<process>/.
     gmprof_capture_start(NULL);     // mode and metrics of options, or the run's defaults
     ...the work to profile, ranges included...
     gmprof_capture_stop();          // writes it; gmprof_output_dir() names the directory
   One capture at a time: a start while one runs (or `gmprof capture` has one armed) fails
   with GMPROF_ERROR_NOT_INITIALIZED and says which. */
gmprof_status gmprof_capture_start(const gmprof_options *options);

/* Ends the capture gmprof_capture_start started and writes its outputs. */
gmprof_status gmprof_capture_stop(void);

/* ---- In-kernel region timers (device side: include/gmprof_device.cuh) ----
   gmprof_dt_buffer *t; unsigned long long *p;
   gmprof_dt_alloc(1 << 16, &t);  gmprof_dt_device_ptr(t, &p);
   kernel<<<grid, block>>>(..., p);
   const char *names[] = {"load", "compute", "store"};
   gmprof_dt_collect(t, names, 3, "sm");   // right after the launch, on the launching thread
   ...  gmprof_dt_free(t);
   Records join the launch's kernel row and range; gmprof_finish writes regions.csv and the
   region tracks of trace.json. */
typedef struct gmprof_dt_buffer gmprof_dt_buffer;

/* Allocates a zeroed buffer of capacity records (16 bytes each, plus a 64-byte header) in the
   current CUDA context. */
gmprof_status gmprof_dt_alloc(unsigned int capacity, gmprof_dt_buffer **out);

/* The device pointer to pass to the kernel (16-byte aligned; a buffer you allocate yourself
   must be too: a kernel given a misaligned one records nothing and says so in the header). */
gmprof_status gmprof_dt_device_ptr(const gmprof_dt_buffer *buffer, unsigned long long **out);

/* Synchronizes, decodes the buffer as the calling thread's last profiled launch, hands it to
   the outputs and clears the buffer. names: NULL or count region names by id (NULL entries
   allowed); tracks: "sm" (one timeline track per SM, the default for NULL) or "lane". */
gmprof_status gmprof_dt_collect(gmprof_dt_buffer *buffer, const char *const *names, int count, const char *tracks);

/* Frees a buffer (NULL is allowed). */
gmprof_status gmprof_dt_free(gmprof_dt_buffer *buffer);

/* For a buffer you allocate yourself: zeroes len bytes of a host image (8-byte aligned) and
   writes the header for (len - 64) / 16 records; copy it to the device before the launch. */
gmprof_status gmprof_dt_write_header(void *bytes, unsigned long long len);

/* Synchronizes the current context and copies len bytes from device_ptr into host_out. */
gmprof_status gmprof_dt_read_device(unsigned long long device_ptr, void *host_out, unsigned long long len);

/* Decodes a host copy of a buffer to JSON in *json_out (NULL: none; free it with
   gmprof_string_free). correlation_id: >= 0 the launch, -1 the calling thread's last profiled
   launch, -2 none. submit nonzero: also hand it to the outputs. */
gmprof_status gmprof_dt_decode(const void *bytes, unsigned long long len, const char *const *names, int count,
                               long long correlation_id, const char *tracks, int submit, char **json_out);

/* The correlation id of the calling thread's last profiled kernel launch, -1 if none. */
gmprof_status gmprof_dt_last_correlation_id(long long *out);

/* Frees a string returned by gmprof (NULL is allowed). */
gmprof_status gmprof_string_free(char *s);

#ifdef __cplusplus
}
#endif

#endif /* GMPROF_H */
