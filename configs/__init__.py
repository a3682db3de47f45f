"""The example configs, installed with pinnkit as the package data of ``pinnkit.examples``
(pyproject.toml maps that package onto this folder): ``pinnkit examples`` lists them,
``pinnkit examples copy DIR`` copies them out."""
