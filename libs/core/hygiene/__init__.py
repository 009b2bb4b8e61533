"""Pure checks on stored text that label it without changing or refusing it."""
