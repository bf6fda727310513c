"""The built-in SageMaker Debugger rules, one module per rule; ``registry`` finds them by name."""
