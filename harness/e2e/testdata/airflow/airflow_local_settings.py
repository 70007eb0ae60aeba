"""Cluster policies of the end-to-end tests' Airflow home.

They change how the operators watch their pods, never what the pods run:
kwok serves no container logs, so the operators read none; and the operators
keep the pods they created, so that the tests can check where each ran.
A pod of the step named by MANIFOLD_SIMFAIL_STEP gets the label that makes kwok
fail it.
"""

import os

from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from airflow.providers.cncf.kubernetes.utils.pod_manager import OnFinishAction

FAIL_LABEL = "sim.manifold.dev/fail"
STEP_LABEL = "manifold.dev/step"


def task_policy(task):
    # A mapped task (a foreach step) holds its operator's arguments until it
    # expands.
    partial = getattr(task, "partial_kwargs", None)
    if isinstance(partial, dict):
        cls = getattr(task, "operator_class", None)
        if isinstance(cls, type) and issubclass(cls, KubernetesPodOperator):
            partial["get_logs"] = False
            partial["on_finish_action"] = OnFinishAction.KEEP_POD.value
        return
    if isinstance(task, KubernetesPodOperator):
        task.get_logs = False
        task.on_finish_action = OnFinishAction.KEEP_POD


def pod_mutation_hook(pod):
    step = os.environ.get("MANIFOLD_SIMFAIL_STEP")
    labels = pod.metadata.labels or {}
    if step and labels.get(STEP_LABEL) == step:
        labels[FAIL_LABEL] = "true"
        pod.metadata.labels = labels
