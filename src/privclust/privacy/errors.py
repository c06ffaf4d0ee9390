"""The privacy layer's errors, in a module of their own so that catching them loads nothing else."""

__all__ = ["BudgetExceededError"]


class BudgetExceededError(RuntimeError):
    """Raised when a spend would take the total past the accountant's budget."""
