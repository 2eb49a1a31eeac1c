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
   default 20us), and folds them into every range and kernel: pm.csv and the "pm" section of
   report.json. An add-on to mode "trace"; beside a counter mode gmprof_init fails with
   GMPROF_ERROR_INVALID_ARGUMENT if CUPTI does not let both hold the counters. */
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

#ifdef __cplusplus
}
#endif

#endif /* GMPROF_H */
