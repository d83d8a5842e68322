"""Budgets: limits on a model's counts, read from TOML, validated closed, checked exactly: the
schema and result values (:mod:`.schema`, which states the file's format and conventions), the
parser (:mod:`.parser`) and the evaluation (:mod:`.evaluation`)."""

from vitprof.checks.budget.evaluation import check_profile, evaluate
from vitprof.checks.budget.parser import at_input, load_budgets, parse_budget, parse_budgets
from vitprof.checks.budget.schema import (
    SHARES,
    Budget,
    BudgetResult,
    Check,
    CheckResult,
)

__all__ = ["SHARES", "Budget", "BudgetResult", "Check", "CheckResult", "at_input",
           "check_profile", "evaluate", "load_budgets", "parse_budget", "parse_budgets"]
