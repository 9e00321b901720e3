"""Tools that answer whether the harness works here: committed results re-trained, a machine's devices checked."""
