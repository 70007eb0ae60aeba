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
the DAG's default params. A KubernetesJobOperator task reports the Job that its
build_job_request_obj() builds, for its first try and its second; a Service task
(KubernetesCreateResourceOperator or KubernetesDeleteResourceOperator), its
rendered yaml_conf and the namespace it would use. Every task of a DAG renders in
one run, RUN_ID. For every DIR/*.kpo.json: the same pods, Jobs and Services, built
by the operators from the JSON arguments (its dynamic flows' tasks aside).

A dynamic flow's gates (PythonOperator tasks) and the tasks mapped over their XComs
are known only in a run. With DAGCHECK_XCOM naming a JSON file of
{dag_id: {task_id: XCom}}, the XComs of a run's producing tasks, every XComArg
resolves to the XCom of its task there (the one thing a worker would ask the API
server for); each gate then renders and runs its callable as a worker would (its
return value is its XCom, and a skip is reported), and each task mapped over an
items gate's XCom renders, for each item, through Airflow's own expansion, and
builds its pod.
"""

import ast
import atexit
import copy
import datetime
import json
import os
import shutil
import sys
import tempfile
import traceback
import types
import uuid

# The run every task renders in: a manual run's id, with the characters such ids
# hold that Kubernetes names cannot.
RUN_ID = "manual__2026-12-02T14:20:32.669649+00:00"

# What a worker in a pod would read as its own namespace: the Job operator's own
# fallback, which a multi-node step must not take (its Service would be elsewhere).
WORKER_NAMESPACE = "airflow-worker-namespace"

# A kubeconfig for a server that is never called: building a Job asks the hook
# whether it runs in the cluster, which loads a configuration but sends nothing.
KUBECONFIG = {
    "apiVersion": "v1", "kind": "Config", "current-context": "c",
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    "users": [{"name": "u", "user": {"token": "unused"}}],
}


# The namespace of the Kubernetes connection where a test gives it one.
CONNECTION_NAMESPACE = "connection-namespace"


def connection(namespace=None):
    """Sets the Kubernetes connection the operators use, with namespace if given."""
    extra = {"kube_config": json.dumps(KUBECONFIG)}
    if namespace:
        extra["namespace"] = namespace
    os.environ["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = json.dumps({"conn_type": "kubernetes", "extra": extra})


def with_connection_namespace(build):
    """What build() returns while the connection names CONNECTION_NAMESPACE."""
    connection(CONNECTION_NAMESPACE)
    try:
        return build()
    finally:
        connection()


def main():
    folder = os.path.abspath(sys.argv[1])
    home = tempfile.mkdtemp(prefix="manifold-airflow-home-")
    # Registered before Airflow is imported, so removed after Airflow's own exit
    # handlers, which may still write there, have run.
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    os.environ["AIRFLOW_HOME"] = home
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    # The operator asks the connection for a namespace when a task names none.
    connection()
    simulate_xcoms()

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


# The XComs of a simulated run (DAGCHECK_XCOM), by DAG and task; a gate's own
# XCom is added when it has run.
XCOMS = {}


def simulate_xcoms():
    """Makes every XComArg resolve to its task's XCom in XCOMS."""
    path = os.environ.get("DAGCHECK_XCOM")
    if not path:
        return
    with open(path, encoding="utf-8") as f:
        XCOMS.update(json.load(f))
    from airflow.sdk.definitions.xcom_arg import PlainXComArg

    def resolve(self, context):
        values = XCOMS.get(self.operator.dag_id, {})
        if self.operator.task_id not in values:
            raise KeyError("no XCom of task %s in DAGCHECK_XCOM" % self.operator.task_id)
        return values[self.operator.task_id]

    PlainXComArg.resolve = resolve


def run_gate(task):
    """Runs gate task as a worker would: renders it, calls its callable; reports
    what it returned (now its XCom) or why it skipped or failed."""
    from airflow.sdk.exceptions import AirflowSkipException

    out = {}
    try:
        op, _ = render(task)
        result = op.python_callable(*op.op_args)
        XCOMS.setdefault(task.dag_id, {})[task.task_id] = result
        out["result"] = result
    except AirflowSkipException as e:
        out["skipped"] = str(e)
    except Exception:
        out["error"] = traceback.format_exc()
    return out


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
        if stored is not None and out["tasks"][task.task_id]["mapped"] and "mapped_over" not in out["tasks"][task.task_id]:
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
        "setup": task.is_setup,
        "teardown": task.is_teardown,
        "upstream": sorted(task.upstream_task_ids),
        "downstream": sorted(task.downstream_task_ids),
        "trigger_rule": getattr(task.trigger_rule, "value", task.trigger_rule),
        "instances": [],
    }
    if out["operator"] == "PythonOperator":
        # A gate of a dynamic flow: it runs no pod.
        out["python_callable"] = task.python_callable.__name__
        if task.dag_id in XCOMS:
            out["gate"] = run_gate(task)
        return out
    over = task.expand_input.value["env_vars"] if mapped else None
    if mapped and not isinstance(over, list):
        # Mapped over an XCom: how many instances, and their pods, are known
        # only in a run (simulated when DAGCHECK_XCOM gives the XComs).
        out["mapped_over"] = repr(over)
        items = XCOMS.get(task.dag_id, {}).get(over.arg.operator.task_id)
        if items is None:
            return out
        indexes = range(len(items))
    elif mapped:
        indexes = range(len(over))
    else:
        indexes = [None]
    for index in indexes:
        try:
            out["instances"].append(instance(dag, task, index))
        except Exception:
            out["instances"].append({"error": traceback.format_exc()})
    return out


def context_of(task, map_index=None, try_number=1):
    """The template context a worker gives the task instance (the map_index'th
    expansion of a mapped task) in its try_number'th try of run RUN_ID."""
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    ti = RuntimeTaskInstance.model_construct(
        id=uuid.uuid4(), task_id=task.task_id, dag_id=task.dag_id, run_id=RUN_ID, try_number=try_number,
        map_index=-1 if map_index is None else map_index, task=task,
        start_date=datetime.datetime.now(datetime.timezone.utc), max_tries=task.retries)
    context = ti.get_template_context()
    # What the API server tells the worker of the run: its conf, empty.
    context["dag_run"] = types.SimpleNamespace(conf={})
    return context


def render(task, map_index=None, try_number=1):
    """Renders a copy of task's templated fields as a worker would (rendering
    changes Kubernetes objects in place, and a worker parses the DAG anew for each
    try); returns the operator of this instance (for a mapped task, the one of this
    map index) and the context."""
    task = copy.deepcopy(task)
    context = context_of(task, map_index, try_number)
    task.render_template_fields(context)
    return context["task"], context


def instance(dag, task, map_index):
    """Renders task (its map_index'th expansion) as a worker would, then builds what it creates."""
    from airflow.providers.cncf.kubernetes.operators.job import KubernetesJobOperator
    from airflow.providers.cncf.kubernetes.operators.resource import KubernetesResourceBaseOperator
    from kubernetes.client import ApiClient

    api = ApiClient()
    op, context = render(task, map_index)
    if isinstance(op, KubernetesResourceBaseOperator):
        return {"yaml_conf": op.yaml_conf, "namespace": op.get_namespace(),
                "connection_namespace": with_connection_namespace(lambda: render(task)[0].get_namespace())}
    out = {
        "retries": op.retries,
        "retry_delay": seconds(op.retry_delay),
        "retry_exponential_backoff": op.retry_exponential_backoff,
        "max_retry_delay": seconds(op.max_retry_delay),
        "execution_timeout": seconds(op.execution_timeout),
        "on_finish_action": op.on_finish_action.value,
    }
    if isinstance(op, KubernetesJobOperator):
        out["job"] = api.sanitize_for_serialization(build_job(op, context))
        op, context = render(task, map_index, try_number=2)
        out["retry_job"] = api.sanitize_for_serialization(build_job(op, context))
        out["wait_until_job_complete"] = op.wait_until_job_complete
        out["connection_namespace"] = with_connection_namespace(
            lambda: build_job(*render(task, map_index)).metadata.namespace)
        return out
    out["pod"] = api.sanitize_for_serialization(op.build_pod_request_obj(dry_run=True))
    return out


def build_job(op, context):
    """The Job the operator creates, as execute() builds it, on a worker that runs in
    a pod of namespace WORKER_NAMESPACE."""
    op.__dict__["_incluster_namespace"] = WORKER_NAMESPACE
    op.name = op._set_name(op.name)
    return op.build_job_request_obj(context)


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
    "security_context": "V1PodSecurityContext", "full_pod_spec": "V1Pod",
}
DURATIONS = {"retry_delay", "max_retry_delay", "execution_timeout"}
# The templated arguments that may hold free text. The others (volumes,
# volume_mounts, env_from, container_resources) hold only names and quantities.
TEXT = {"image", "name", "namespace", "cmds", "arguments", "labels", "annotations", "node_selector"}


# The variables of a multi-node step's Job task whose values are templates of the
# run's names, like the arguments JOB_TEMPLATES.
RANK_ZERO = {"MASTER_ADDR", "PET_MASTER_ADDR", "NEURON_RT_ROOT_COMM_ID"}
JOB_TEMPLATES = {"name", "namespace", "labels"}


# The variable whose value is the template of the DAG run's id, in a flow with an
# artifact store.
RUN_ID_VAR = "MANIFOLD_RUN_ID"
TRACEPARENT_VAR = "TRACEPARENT"


def literal_text(key, value, job=False):
    """Wraps the free text of a templated argument in literal(), as README says a
    DAG built from the JSON must: every string but a MANIFOLD_PARAM_ variable's
    value (a template of the DAG's params), MANIFOLD_RUN_ID's (the run's id) and
    TRACEPARENT's (the run's trace context, from its conf) reaches the pod as written, and in a Job task (job) but the rank 0 addresses
    and the arguments JOB_TEMPLATES too."""
    from airflow.sdk import literal

    if key == "env_vars":
        for env in value:
            name = env.name
            env.name = literal(env.name)
            if env.value is not None and not name.startswith("MANIFOLD_PARAM_") and name not in (RUN_ID_VAR, TRACEPARENT_VAR) and not (job and name in RANK_ZERO):
                env.value = literal(env.value)
        return value
    if key not in TEXT or (job and key in JOB_TEMPLATES):
        return value
    if isinstance(value, str):
        return literal(value)
    if isinstance(value, list):
        return [literal(v) for v in value]
    if isinstance(value, dict):
        return {k: literal(v) for k, v in value.items()}
    return value


def pods_from_json(path):
    """Builds what each task creates from the .kpo.json arguments, as a team writing
    its own DAG would: a pod per item, a Job per item, or the rendered Services."""
    from airflow.providers.cncf.kubernetes.operators.job import KubernetesJobOperator
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
    from airflow.providers.cncf.kubernetes.operators.resource import (
        KubernetesCreateResourceOperator,
        KubernetesDeleteResourceOperator,
    )
    from airflow.sdk import DAG
    from kubernetes.client import ApiClient

    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    api = ApiClient()

    def model(value, kind):
        return api.deserialize(types.SimpleNamespace(data=json.dumps(value)), kind)

    classes = {c.__module__ + "." + c.__name__: c for c in (
        KubernetesPodOperator, KubernetesJobOperator, KubernetesCreateResourceOperator, KubernetesDeleteResourceOperator)}
    out = {}
    for task in spec["tasks"]:
        if "gate" in task or "expand_from" in task:
            continue  # known only in a run
        cls = classes.get(task["operator"])
        if cls is None:
            raise ValueError("task %s: unknown operator %s" % (task["task_id"], task["operator"]))
        if cls in (KubernetesCreateResourceOperator, KubernetesDeleteResourceOperator):
            with DAG(dag_id=spec["dag_id"], schedule=None, params=spec["params"]):
                op, _ = render(cls(**task["arguments"]))
            out[task["task_id"]] = [{"yaml_conf": op.yaml_conf, "namespace": op.get_namespace()}]
            continue
        job = cls is KubernetesJobOperator
        args = {}
        for key, value in task["arguments"].items():
            if key in MODELS:
                value = model(value, MODELS[key])
            elif key in DURATIONS:
                value = datetime.timedelta(seconds=value)
            args[key] = value
        envs = [model(env, MODELS["env_vars"]) for env in task.get("expand", {}).get("env_vars", [])]
        built = []
        for i, env in enumerate(envs or [None]):
            kwargs = dict(args)
            if env is not None:
                kwargs["env_vars"] = env
            kwargs = {k: literal_text(k, v, job) for k, v in kwargs.items()}
            if job:
                # One DAG per item, so that every item's task has the step's id.
                with DAG(dag_id=spec["dag_id"], schedule=None, params=spec["params"]):
                    op = cls(**kwargs)
                op, context = render(op, None if env is None else i)
                built.append(api.sanitize_for_serialization(build_job(op, context)))
                continue
            with DAG(dag_id=spec["dag_id"] + "-from-json", schedule=None, params=spec["params"]) as dag:
                kwargs["task_id"] = "%s-%d" % (task["task_id"], i)
                op = cls(**kwargs)
            ti = types.SimpleNamespace(map_index=-1, task=op)
            context = {"ti": ti, "task": op, "dag": dag, "params": dict(spec["params"]), "run_id": RUN_ID,
                       "dag_run": types.SimpleNamespace(conf={})}
            op.render_template_fields(context)
            built.append(api.sanitize_for_serialization(op.build_pod_request_obj(dry_run=True)))
        out[task["task_id"]] = built
    return out


if __name__ == "__main__":
    main()
