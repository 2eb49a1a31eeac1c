"""gmprof.device_timers against the real libgmprof (no GPU): decoding a buffer recorded on an
H100 (tests/data/device_timers/), the host header, and errors for what is not a buffer."""

import os
import struct
import sys
import unittest

if os.environ.get("GMPROF_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

import gmprof  # noqa: E402
from gmprof import device_timers  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "device_timers")


def recorded(name):
    with open(os.path.join(DATA, name), "rb") as f:
        return f.read()


@unittest.skipUnless(os.environ.get("GMPROF_TEST_LIBRARY"), "GMPROF_TEST_LIBRARY is not set to a built libgmprof.so")
class DeviceTimersTest(unittest.TestCase):
    def setUp(self):
        self._saved = os.environ.get("GMPROF_LIBRARY")
        os.environ["GMPROF_LIBRARY"] = os.environ["GMPROF_TEST_LIBRARY"]
        gmprof._set_library(None)

    def tearDown(self):
        if self._saved is None:
            os.environ.pop("GMPROF_LIBRARY", None)
        else:
            os.environ["GMPROF_LIBRARY"] = self._saved
        gmprof._set_library(None)

    def test_recorded_spin_buffer_decodes(self):
        data = recorded("spin.bin")
        launch = device_timers.decode(data, ["", "spin_1us", "spin_10us", "spin_1ms"], correlation_id=None)
        self.assertIsNone(launch["correlation_id"])
        lanes = launch["spans"]["lanes"]
        self.assertEqual((lanes["expected"], lanes["started"], lanes["finished"]), (264, 264, 264))
        by_name = device_timers.durations(launch)
        for name, target in (("spin_1us", 1000), ("spin_10us", 10000), ("spin_1ms", 1000000)):
            self.assertEqual(len(by_name[name]), 264)
            self.assertTrue(all(target <= d <= target + 200 for d in by_name[name]), name)
        self.assertEqual(launch["header"]["overflow"], 0)

    def test_recorded_overflow_is_reported(self):
        data = recorded("overflow.bin")
        launch = device_timers.decode(bytearray(data), correlation_id=None)
        self.assertEqual(launch["header"]["overflow"], 1320)

    def test_host_header_matches_the_library(self):
        words = device_timers.host_header(4)
        image = struct.pack("<%dQ" % (8 + 8), *(words + [0] * 14))
        launch = device_timers.decode(image, correlation_id=None)
        self.assertEqual(launch["header"]["capacity"], 4)
        self.assertEqual(launch["header"]["lanes"], None)
        self.assertEqual(device_timers.buffer_bytes(4), len(image))

    def test_not_a_buffer_is_an_error(self):
        with self.assertRaises(gmprof.GmprofError) as ctx:
            device_timers.decode(b"\0" * 128, correlation_id=None)
        self.assertEqual(ctx.exception.status_name, "GMPROF_ERROR_INVALID_ARGUMENT")
        self.assertIn("magic", ctx.exception.message)
        with self.assertRaises(TypeError):
            device_timers.decode(12345)

    def test_no_launch_yet_on_this_thread(self):
        self.assertIsNone(device_timers.last_correlation_id())


if __name__ == "__main__":
    unittest.main()
