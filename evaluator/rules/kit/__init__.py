"""The rule kit: the helpers every built-in rule is written with, public for your own rules.

To write a rule like a built-in one, copy its module (``rule-evaluator rules NAME --source``
prints it as a rule file of your own), rename the class, and change what it checks: its imports
come from here, from ``evaluator.rules`` (``Rule``) and, for helpers of one kind of rule
(activations, loss progress, class labels), from ``rules_builtin.kit``, never from
``rules_builtin``'s private modules. Import each helper from its module
(``from evaluator.rules.kit.params import parse_float``).

``params``: parsing the parameters SageMaker sends (all strings) into numbers, flags, lists,
    regular expressions and modes. ``parse_float(rule, name, value, minimum=...)`` and its
    siblings raise a ``ConfigurationError`` naming the rule, the parameter and the bad value, so
    a job with a bad ``RuleParameters`` ends in Error with a message that says what to fix.
    ``Param`` documents one parameter; a rule lists its own in ``PARAMETERS`` (``rule-evaluator
    rules NAME`` and docs/rules.md show them).
``selection``: which tensors a rule looks at. ``TensorSelection(rule, collection_names,
    tensor_regex, default_collections=...)`` resolves SageMaker's ``collection_names`` and
    ``tensor_regex`` parameters against a trial (``names(trial, step=...)``), with the rule's
    default when neither is given; ``scalars_at(trial, step)`` gives the selected one-element
    tensors saved at a step as ``(name, float)``. ``scalar``/``scalar_at`` read one-element
    tensors as floats; ``percent_of`` and ``listed`` help with messages.
``windows``: numbers per step computed over a window of steps at once. ``WindowedRows(trial,
    compute)`` reads the selected tensors over the next saved steps in one batch (when the trial
    can) and applies ``compute`` to the stacked rows; ``get(name, step, names)`` gives a step's
    result, or None where the rule should fall back to ``trial.tensor(name).value(step)``.
    With ``before=k``, ``compute`` may compare each row with the ``k`` rows before it, and
    ``get(name, step, names, earlier=steps)`` answers with exactly those earlier steps' values
    before ``step``'s: from the window (which keeps the previous window's last rows), or over
    those values read alone, with the same ``compute`` (UnchangedTensor).
``modes``: which mode (TRAIN, EVAL, PREDICT, GLOBAL) a saved value belongs to. ``mode_of``
    gives a step's mode and mode step (GLOBAL counted as TRAIN, as ``as_training`` does),
    ``step_in_mode`` the recorded mode and mode step of a step only when it is one of a given
    mode (the steps a rule that follows training judges), ``value_in_mode`` reads a value only from a step of the given mode, and
    ``is_epoch_end_log``/``epoch_end_pair`` handle the epoch-end logs Keras' hook saves at EVAL
    steps; ``pass_ended`` says whether a validation pass is complete when the steps to
    evaluate run out (Overfit, Overtraining).

These modules are part of the rule framework: they import only ``evaluator`` modules at or
below ``evaluator.rules``, never a built-in rule.
"""
