"""Language-model policies behind one interface (`Policy`), and `PolicyAgent`, which plays
episodes with one."""
