"""Bad options that every framework module (torch, JAX) must refuse with the same message."""

BAD_MODULE_OPTIONS = [
    ({"d_model": 4.0}, TypeError, "d_model must be an integer"),
    ({"d_model": 16, "dropout": 1.0}, ValueError, r"dropout must be in \[0, 1\)"),
    ({"d_model": 16, "max_len": 0}, ValueError, "max_len must be an integer >= 1"),
    ({"d_model": 16, "batch_first": "yes"}, TypeError, "batch_first must be True or False"),
    ({"d_model": 2, "shift": 1}, ValueError, "n - shift"),
]
