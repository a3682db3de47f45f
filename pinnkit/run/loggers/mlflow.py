"""``logging.mlflow``: MLflow through ``mlflow-skinny`` (the ``mlflow`` extra).

The default store is the file store ``RUN/mlruns`` (``mlflow ui --backend-store-uri
RUN/mlruns`` shows it). MLflow 3 refuses file stores unless ``MLFLOW_ALLOW_FILE_STORE``
is set; a writer on a file store sets it to ``true`` in this process when it is unset (the
user asked for that store). Any other ``tracking_uri`` (a server, or ``sqlite:///...``
with the full ``mlflow`` package) is used as given.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from .base import AbstractScalarWriter, require


class MlflowWriter(AbstractScalarWriter):
    """One MLflow run named ``name`` in ``experiment`` at ``tracking_uri`` (None: the file
    store ``log_dir/mlruns``); ``params``: flat ``{key: value}`` logged as run parameters."""

    def __init__(self, log_dir: str | Path, *, experiment: str, name: str,
                 tracking_uri: str | None = None, params: dict | None = None):
        require("mlflow", "logging.mlflow", "mlflow")
        from mlflow.entities import Metric, Param
        from mlflow.tracking import MlflowClient

        uri = tracking_uri or (Path(log_dir).resolve() / "mlruns").as_uri()
        if uri.startswith("file:") or "://" not in uri:
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self._metric = Metric
        self._client = MlflowClient(tracking_uri=uri)
        found = self._client.get_experiment_by_name(experiment)
        eid = found.experiment_id if found else self._client.create_experiment(experiment)
        self._id = self._client.create_run(eid, run_name=name).info.run_id
        items = [Param(k, str(v)[:6000]) for k, v in (params or {}).items()]  # MLflow's limits:
        for i in range(0, len(items), 100):  # 6000 characters a value, 100 parameters a batch
            self._client.log_batch(self._id, params=items[i:i + 100])

    def scalars(self, step, values):
        stamp = int(time.time() * 1000)
        metrics = [self._metric(k, float(v), stamp, int(step)) for k, v in values.items()]
        for i in range(0, len(metrics), 1000):  # MLflow's batch limit
            self._client.log_batch(self._id, metrics=metrics[i:i + 1000])

    def close(self):
        self._client.set_terminated(self._id)
