from perfci.measure.timing import HostMarks, clock_settled, time_iterations


class RecordingMarks:
    """Marks that log the order of events instead of reading a clock."""

    def __init__(self, log, n):
        self.log = log
        self.n = n

    def start(self, i):
        self.log.append(("start", i))

    def stop(self, i):
        self.log.append(("stop", i))

    def elapsed_us(self):
        return [float(i) for i in range(self.n)]


def test_flush_runs_before_each_start_mark_never_inside():
    log = []
    times = time_iterations(lambda: log.append("run"), RecordingMarks(log, 3), 3,
                            flush=lambda: log.append("flush"))
    assert times == [0.0, 1.0, 2.0]
    assert log == ["flush", ("start", 0), "run", ("stop", 0),
                   "flush", ("start", 1), "run", ("stop", 1),
                   "flush", ("start", 2), "run", ("stop", 2)]


def test_host_marks_measure_only_between_start_and_stop():
    ticks = iter([1_000, 4_000, 10_000, 10_500])
    marks = HostMarks(2, clock=lambda: next(ticks))
    assert time_iterations(lambda: None, marks, 2) == [3.0, 0.5]


def test_clock_settled_needs_a_full_window_within_tolerance():
    assert not clock_settled([1980.0, 1700.0])  # too few readings
    assert not clock_settled([1980.0, 1700.0, 1500.0])  # still falling to the power cap
    assert clock_settled([1980.0, 1700.0, 1500.0, 1505.0, 1498.0])
    assert not clock_settled([None, None, None])  # no telemetry is never 'settled'


from perfci.measure.timing import is_flush_kernel, kernel_time_per_launch  # noqa: E402

FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<unsigned char>>"


def test_profiler_launches_are_runs_between_flushes_and_sum_their_kernels():
    kernels = [(0.0, FILL, 80.0), (81.0, "_splitk_kernel", 9.0), (91.0, "_reduce_kernel", 1.5),
               (93.0, FILL, 80.0), (174.0, "_splitk_kernel", 9.5), (184.0, "_reduce_kernel", 1.0)]
    assert kernel_time_per_launch(list(reversed(kernels)), 2, is_flush_kernel) == [10.5, 10.5]


def test_a_first_flush_outside_the_profile_changes_nothing():
    kernels = [(1.0, "gemm", 5.0), (7.0, FILL, 80.0), (90.0, "gemm", 6.0)]
    assert kernel_time_per_launch(kernels, 2, is_flush_kernel) == [5.0, 6.0]


def test_a_launch_count_mismatch_is_an_error_not_a_wrong_number():
    import pytest

    with pytest.raises(RuntimeError, match="saw 1 launches where 2 were timed"):
        kernel_time_per_launch([(0.0, "gemm", 5.0)], 2, is_flush_kernel)
