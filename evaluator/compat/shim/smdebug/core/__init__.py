"""smdebug.core: the modules user code imports from it."""
