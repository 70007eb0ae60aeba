"""Load Manifold's generated Airflow DAGs with Airflow itself and report, as JSON in
the file OUT (Airflow logs to standard output), what Airflow made of them. The Go tests (emit/airflow) decide
what is right; this script only asks Airflow.

Usage: python dagcheck.py DIR OUT

For every DIR/*.py: whether Python parses it, and its syntax tree with every
constant blanked (its shape, which no value may change). Then, for the DagBag of
DIR: the import errors, and for every DAG its settings, whether it serializes as
the DAG processor would store it (and how many instances the scheduler makes of a
mapped task from the stored DAG), and for every task its dependencies, its retry
and timeout arguments, and for each map index the pod that the operator's own
build_pod_request_obj() builds after rendering the task's templated fields with
the DAG's default params. For every DIR/*.kpo.json: the same pods, built by
KubernetesPodOperator from the JSON arguments.
"""

import ast
import datetime
import json
import os
import sys
import tempfile
import traceback
import types


def main():
    folder = os.path.abspath(sys.argv[1])
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="manifold-airflow-home-")
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    # The operator asks the connection for a namespace when a task names none.
    os.environ["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = json.dumps({"conn_type": "kubernetes"})

    report = {"syntax_errors": {}, "shapes": {}, "import_errors": {}, "dags": {}, "kpo_json": {}}
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            source = f.read()
        try:
            tree = ast.parse(source, filename=name)
        except SyntaxError as e:
            report["syntax_errors"][name] = str(e)
            continue
        report["shapes"][name] = ast.dump(Blank().visit(tree), include_attributes=False)

    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=folder, safe_mode=False)
    report["import_errors"] = {os.path.basename(k): v for k, v in bag.import_errors.items()}
    for dag_id, dag in sorted(bag.dags.items()):
        report["dags"][dag_id] = describe_dag(dag)

    for name in sorted(os.listdir(folder)):
        if name.endswith(".kpo.json"):
            try:
                report["kpo_json"][name] = pods_from_json(os.path.join(folder, name))
            except Exception:
                report["kpo_json"][name] = {"error": traceback.format_exc()}
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1, sort_keys=True)


class Blank(ast.NodeTransformer):
    """Replaces every constant by one of its type's placeholder."""

    def visit_Constant(self, node):
        return ast.Constant(value=type(node.value).__name__)


def describe_dag(dag):
    from airflow.serialization.serialized_objects import DagSerialization

    out = {
        "schedule": dag.schedule if isinstance(dag.schedule, str) or dag.schedule is None else repr(dag.schedule),
        "catchup": dag.catchup,
        "start_date": dag.start_date.isoformat() if dag.start_date else None,
        "params": {k: v for k, v in dag.params.dump().items()},
        "fileloc": os.path.basename(dag.fileloc),
        "tasks": {},
    }
    stored = None
    try:
        stored = DagSerialization.from_dict(DagSerialization.to_dict(dag))
        out["serialization_error"] = None
    except Exception:
        out["serialization_error"] = traceback.format_exc()
    for task in dag.tasks:
        out["tasks"][task.task_id] = describe_task(dag, task)
        if stored is not None and out["tasks"][task.task_id]["mapped"]:
            # What the scheduler, which reads the stored DAG, expands the task to.
            count = stored.get_task(task.task_id).get_parse_time_mapped_ti_count()
            out["tasks"][task.task_id]["scheduled_map_count"] = count
    return out


def describe_task(dag, task):
    from airflow.sdk.definitions.mappedoperator import MappedOperator

    mapped = isinstance(task, MappedOperator)
    out = {
        "operator": task.operator_class.__name__ if mapped else type(task).__name__,
        "mapped": mapped,
        "upstream": sorted(task.upstream_task_ids),
        "downstream": sorted(task.downstream_task_ids),
        "instances": [],
    }
    if mapped:
        count = len(task.expand_input.value["env_vars"])
        indexes = range(count)
    else:
        indexes = [None]
    for index in indexes:
        try:
            out["instances"].append(instance(dag, task, index))
        except Exception:
            out["instances"].append({"error": traceback.format_exc()})
    return out


def instance(dag, task, map_index):
    """Renders task (its map_index'th expansion) as a worker would, then builds its pod."""
    from airflow.sdk.definitions.param import process_params
    from kubernetes.client import ApiClient

    ti = types.SimpleNamespace(map_index=-1 if map_index is None else map_index, task=task,
                               dag_id=dag.dag_id, task_id=task.task_id, try_number=1, run_id="manual")
    context = {
        "ti": ti, "task_instance": ti, "dag": dag, "task": task, "run_id": "manual",
        "dag_run": types.SimpleNamespace(conf={}),
    }
    context["params"] = process_params(dag, task, {}, suppress_exception=False)
    task.render_template_fields(context)
    op = context["task"]  # for a mapped task, the operator of this map index
    pod = op.build_pod_request_obj(dry_run=True)
    return {
        "pod": ApiClient().sanitize_for_serialization(pod),
        "retries": op.retries,
        "retry_delay": seconds(op.retry_delay),
        "retry_exponential_backoff": op.retry_exponential_backoff,
        "max_retry_delay": seconds(op.max_retry_delay),
        "execution_timeout": seconds(op.execution_timeout),
        "on_finish_action": op.on_finish_action.value,
    }


def seconds(d):
    if d is None:
        return None
    if isinstance(d, datetime.timedelta):
        return d.total_seconds()
    return float(d)


# The Kubernetes model class of each operator argument the JSON file writes in
# its API form.
MODELS = {
    "env_vars": "list[V1EnvVar]", "env_from": "list[V1EnvFromSource]", "ports": "list[V1ContainerPort]",
    "container_resources": "V1ResourceRequirements", "volume_mounts": "list[V1VolumeMount]",
    "container_security_context": "V1SecurityContext", "tolerations": "list[V1Toleration]",
    "affinity": "V1Affinity", "volumes": "list[V1Volume]", "image_pull_secrets": "list[V1LocalObjectReference]",
    "security_context": "V1PodSecurityContext",
}
DURATIONS = {"retry_delay", "max_retry_delay", "execution_timeout"}
# The templated arguments that may hold free text. The others (volumes,
# volume_mounts, env_from, container_resources) hold only names and quantities.
TEXT = {"image", "name", "namespace", "cmds", "arguments", "labels", "annotations", "node_selector"}


def literal_text(key, value):
    """Wraps the free text of a templated argument in literal(), as README says a
    DAG built from the JSON must: every string but a MANIFOLD_PARAM_ variable's
    value (a template of the DAG's params) reaches the pod as written."""
    from airflow.sdk import literal

    if key == "env_vars":
        for env in value:
            env.name = literal(env.name)
            if env.value is not None and not env.name.value.startswith("MANIFOLD_PARAM_"):
                env.value = literal(env.value)
        return value
    if key not in TEXT:
        return value
    if isinstance(value, str):
        return literal(value)
    if isinstance(value, list):
        return [literal(v) for v in value]
    if isinstance(value, dict):
        return {k: literal(v) for k, v in value.items()}
    return value


def pods_from_json(path):
    """Builds each task's pods from the .kpo.json arguments, as a team writing its own DAG would."""
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
    from airflow.sdk import DAG
    from kubernetes.client import ApiClient

    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    api = ApiClient()

    def model(value, kind):
        return api.deserialize(types.SimpleNamespace(data=json.dumps(value)), kind)

    out = {}
    with DAG(dag_id=spec["dag_id"] + "-from-json", schedule=None, params=spec["params"]) as dag:
        for task in spec["tasks"]:
            operator = KubernetesPodOperator.__module__ + "." + KubernetesPodOperator.__name__
            if task["operator"] != operator:
                raise ValueError("task %s: operator %s, not %s" % (task["task_id"], task["operator"], operator))
            args = {}
            for key, value in task["arguments"].items():
                if key in MODELS:
                    value = model(value, MODELS[key])
                elif key in DURATIONS:
                    value = datetime.timedelta(seconds=value)
                args[key] = value
            envs = [model(env, MODELS["env_vars"]) for env in task.get("expand", {}).get("env_vars", [])]
            pods = []
            for i, env in enumerate(envs or [None]):
                kwargs = dict(args)
                if env is not None:
                    kwargs["env_vars"] = env
                kwargs = {k: literal_text(k, v) for k, v in kwargs.items()}
                kwargs["task_id"] = "%s-%d" % (task["task_id"], i)
                op = KubernetesPodOperator(**kwargs)
                ti = types.SimpleNamespace(map_index=-1, task=op)
                context = {"ti": ti, "task": op, "dag": dag, "params": dict(spec["params"])}
                op.render_template_fields(context)
                pods.append(api.sanitize_for_serialization(op.build_pod_request_obj(dry_run=True)))
            out[task["task_id"]] = pods
    return out


if __name__ == "__main__":
    main()
