"""How fast the harness trains and answers: against the plain Keras loop, with more workers, under a large
sweep, on each Keras backend, and its commands that do not train.
"""
