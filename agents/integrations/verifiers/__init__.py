"""searchgym's envs for verifiers: what both versions share (`shared`), verifiers 0.3's
``load_environment`` (`v0_3`), and verifiers 0.4's taskset and harness (`v0_4`)."""
