"""perfci.model: the helpers beside the result types."""
from perfci.model import column_mode


def test_column_mode_is_the_value_most_rows_hold_and_can_skip_the_empty_ones():
    rows = [{"git_sha": ""}, {"git_sha": ""}, {"git_sha": "abc"}, {"suite": "decode"}]
    assert column_mode(rows, "git_sha") == ""  # three rows hold none
    assert column_mode(rows, "git_sha", skip_empty=True) == "abc"
    assert column_mode(rows, "suite") == "" and column_mode(rows, "suite", skip_empty=True) == "decode"
    assert column_mode([], "suite") == "" and column_mode([{"arch": " sm_90 "}], "arch") == "sm_90"
