"""Prints, as JSON, the latest run of a DAG in an Airflow sqlite database: its
state and start, and each task instance's state, start and end (RFC 3339, UTC).

usage: runstates.py DB DAG_ID
"""

import datetime
import json
import sqlite3
import sys


def rfc3339(value):
    if value is None:
        return None
    t = datetime.datetime.fromisoformat(str(value))
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.timezone.utc)
    return t.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def main(db, dag_id):
    con = sqlite3.connect(db)
    row = con.execute(
        "SELECT run_id, state, start_date FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1", (dag_id,)
    ).fetchone()
    if row is None:
        json.dump({"error": "no run of DAG %s" % dag_id}, sys.stdout)
        return
    run_id, state, start = row
    tasks = [
        {"task_id": t, "map_index": i, "state": s, "start": rfc3339(b), "end": rfc3339(e)}
        for t, i, s, b, e in con.execute(
            "SELECT task_id, map_index, state, start_date, end_date FROM task_instance "
            "WHERE dag_id = ? AND run_id = ? ORDER BY task_id, map_index",
            (dag_id, run_id),
        )
    ]
    json.dump({"run_id": run_id, "state": state, "start": rfc3339(start), "tasks": tasks}, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
