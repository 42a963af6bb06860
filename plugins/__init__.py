"""runpoint's built-in plugins; each registers through the ``runpoint`` entry-point group."""
