"""Cluster policies of the end-to-end tests' Airflow home.

They change how the operators watch their pods, and what a pod runs only where a
test asks it to fail:
- kwok serves no container logs, so the operators read none, unless
  MANIFOLD_READ_LOGS is 1 (the pods run on a real node, which serves them);
- the operators keep the pods they created, so that the tests can check where
  each ran;
- a pod of the step named by MANIFOLD_SIMFAIL_STEP, or by the content of the
  file MANIFOLD_SIMFAIL_STEP_FILE names (read at each pod, so that a test can
  remove the cause of a failure while Airflow runs), gets the label that makes
  kwok fail it;
- the step container of a pod of the step named by MANIFOLD_EXIT_STEP prints a
  line and exits 3 instead of running its command (on a real node; its image
  must have sh);
- the DAG that MANIFOLD_REJECT_DAG names is refused (a cluster policy
  violation), which Airflow reports as an import error of its file.
"""

import os

from airflow.exceptions import AirflowClusterPolicyViolation
from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from airflow.providers.cncf.kubernetes.utils.pod_manager import OnFinishAction

FAIL_LABEL = "sim.manifold.dev/fail"
STEP_LABEL = "manifold.dev/step"
STEP_CONTAINER = "main"  # base_container_name, as the DAG names it
EXIT_COMMAND = ["sh", "-c", "echo this step fails on purpose; exit 3"]


def dag_policy(dag):
    if dag.dag_id == os.environ.get("MANIFOLD_REJECT_DAG"):
        raise AirflowClusterPolicyViolation(f"DAG {dag.dag_id} is refused by the test's cluster policy")


def task_policy(task):
    read_logs = os.environ.get("MANIFOLD_READ_LOGS") == "1"
    # A mapped task (a foreach step) holds its operator's arguments until it
    # expands.
    partial = getattr(task, "partial_kwargs", None)
    if isinstance(partial, dict):
        cls = getattr(task, "operator_class", None)
        if isinstance(cls, type) and issubclass(cls, KubernetesPodOperator):
            if not read_logs:
                partial["get_logs"] = False
            partial["on_finish_action"] = OnFinishAction.KEEP_POD.value
        return
    if isinstance(task, KubernetesPodOperator):
        if not read_logs:
            task.get_logs = False
        task.on_finish_action = OnFinishAction.KEEP_POD


def fail_step():
    path = os.environ.get("MANIFOLD_SIMFAIL_STEP_FILE")
    if path:
        try:
            with open(path) as f:
                return f.read().strip()
        except FileNotFoundError:
            return None
    return os.environ.get("MANIFOLD_SIMFAIL_STEP")


def pod_mutation_hook(pod):
    labels = pod.metadata.labels or {}
    step = labels.get(STEP_LABEL)
    if step and step == fail_step():
        labels[FAIL_LABEL] = "true"
        pod.metadata.labels = labels
    if step and step == os.environ.get("MANIFOLD_EXIT_STEP"):
        for c in pod.spec.containers:
            if c.name == STEP_CONTAINER:
                c.command = EXIT_COMMAND
                c.args = None
