"""posenc's tests: one folder per package of src/posenc, shared helpers in support/."""
