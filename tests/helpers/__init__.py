"""What several test files share: the CLI in a subprocess (`cli`), small ExecuTorch programs and recorders
(`executorch_programs`), the MiniMalloc benchmark files (`minimalloc_files`), Hypothesis strategies for
problems (`strategies`). Imported as `helpers.<module>` (tests/ is on sys.path, see tests/conftest.py)."""
