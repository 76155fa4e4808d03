"""`sweeper limits set --rate` refuses a rate that does not read as N/T before it reaches
anything: the ledger and AWS named below are unreachable, and the one line names the rate."""

from __future__ import annotations

from click.testing import CliRunner

from sweeper_cli import main


def test_a_malformed_rate_is_refused_in_one_line_before_any_connection() -> None:
    # Given a ledger and an AWS endpoint that nothing answers on
    args = ["limits", "set", "--limit", "app", "--rate", "abc", "--reason", "r"]
    target = ["--database-url", "postgresql://sweeper@127.0.0.1:9/none"]
    # When an operator mistypes the rate
    result = CliRunner().invoke(main, [*args, *target])
    # Then it is refused as a bad request, in one line naming the rate, not as a connection
    assert result.exit_code == 2, result.output
    assert result.output.strip().count("\n") == 0, result.output
    assert "rate 'abc' is not N/PERIOD" in result.output
    assert "Traceback" not in result.output
