"""From config to run directory: the config schema (`RunConfig`, `load_config`), the
builder (`build_run`), checkpoints, the run directory (`train_to_dir`, `load_run`),
evaluation, prediction and export."""
