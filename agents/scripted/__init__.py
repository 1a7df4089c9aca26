"""Scripted agents: baselines (oracle, heuristic, random), planners and the web oracle."""
