"""Mutations of parameter servers on a Dask cluster (issue 22): per-session variable stores on
the workers (minigraph/distributed/worker.py), the runtime's bookkeeping of the variables each
task holds and loses (minigraph/distributed/runtime.py), job specs with counts and tasks no
worker serves (minigraph/distributed/cluster.py), the partitioning that keeps a ps step at one
Dask task per partition (minigraph/distributed/partition.py). Each breaks one key behaviour; a
test of tests/test_ps_cluster.py, tests/test_ps_faults.py or
tests/test_distributed_partition.py must go red.

    python -m tests.hostile.mutations --only PS  # these mutations only (a few minutes each:
                                                    # the tests start LocalClusters)
"""

# ruff: noqa: E501 - tables of source snippets read best unwrapped

from __future__ import annotations

from hostile.mutations import Mutation

PS = ("tests/test_ps_cluster.py",)
FAULTS = ("tests/test_ps_faults.py",)
WORKER = "minigraph/distributed/worker.py"
RUNTIME = "minigraph/distributed/runtime.py"
CLUSTER = "minigraph/distributed/cluster.py"
PARTITION = "minigraph/distributed/partition.py"
SPLIT = ("tests/test_distributed_partition.py",)

MUTATIONS = [
    # -- one store per worker per session -----------------------------------------------------
    Mutation("PS1", "worker: the partitions of a session share one store (values persist across signatures)",
             WORKER, "            store = session_resources(session)\n", "            store = None\n", PS),
    Mutation("PS2", "worker: two sessions on one cluster never share a store",
             WORKER, "        held = _stores.setdefault(worker, {}).get(session)\n",
             "        held = next(iter(_stores.setdefault(worker, {}).values()), None)\n", PS),
    Mutation("PS3", "worker: releasing a session drops its values (what close runs on the workers)",
             WORKER, "    count = len(held.store)\n    held.store.clear()\n", "    count = len(held.store)\n", PS),
    Mutation("PS3b", "worker: the last partition of a session gone drops its store",
             WORKER, "        del sessions[session]\n    store.clear()\n", "        del sessions[session]\n", PS),
    Mutation("PS4", "runtime: the partitions get the session's id (its store)",
             RUNTIME, "self._worker_config, self._id,", "self._worker_config, '',", PS),
    Mutation("PS5", "runtime: client partitions share one store",
             RUNTIME, "Session(part.graph, local, resources=self.client_resources)",
             "Session(part.graph, local)", PS),
    # -- errors of runs that fetch nothing ------------------------------------------------------
    Mutation("PS6", "runtime: a failed partition whose outputs nobody gathers still raises",
             RUNTIME, "        self._wait(runs + remote)\n        _raise_failed(runs)\n",
             "        self._wait(runs + remote)\n", PS),
    # -- job specs ------------------------------------------------------------------------------
    Mutation("PS7", "cluster: counts take the integer-named workers in order, job after job",
             CLUSTER, "            counted += entries\n", "", PS),
    Mutation("PS8", "cluster: a bool is not a count",
             CLUSTER, "if isinstance(entries, int) and not isinstance(entries, bool):",
             "if isinstance(entries, int):", PS),
    # -- losing a worker ------------------------------------------------------------------------
    Mutation("PS9", "runtime: a run needing variables lost with a worker raises UnavailableError",
             RUNTIME, "        if problems:\n            raise UnavailableError(",
             "        if False:\n            raise UnavailableError(", FAULTS),
    Mutation("PS10", "runtime: a run that assigns lost variables brings them back",
             RUNTIME, "                    for name in step.assigns:\n                        lost.pop(name, None)\n",
             "                    pass\n", FAULTS),
    Mutation("PS11", "runtime: the variables lost with a worker that left mid-run are named",
             RUNTIME, '"task then." + self._lost_with(e.address)', '"task then."', FAULTS),
    Mutation("PS12", "runtime: a task no worker serves now is not soft-placed elsewhere",
             RUNTIME, "        if ops:\n            self._check_requested_tasks(ops)\n", "", FAULTS),
    Mutation("PS13", "cluster: a task missing from the map is looked up again (a restarted worker)",
             CLUSTER, "            address = self.tasks(refresh=True).get(task)\n", "            pass\n", FAULTS),
    Mutation("PS14", "runtime: a partition's variables are those its nodes use in the user's graph (a handle may come from another partition)",
             RUNTIME, "_variables_of(part.ops)", "_variables_of(part.graph.operations)", PS + FAULTS),
    # -- fewer Dask tasks per step: handles copied, nodes moved to their only later user ---------
    Mutation("PS15", "partition: a VarHandleOp is copied into each partition of its task using it",
             PARTITION, "    copied |= _own_handles(ops, task, fetched_ops)\n", "", SPLIT + PS),
    Mutation("PS16", "partition: a handle's copy requests the variable's device",
             PARTITION, 'device = local_spec(devices[const]) if const.type == "VarHandleOp" else None',
             "device = None", SPLIT),
    Mutation("PS17", "partition: stateless nodes move to their only user, a later partition of the task",
             PARTITION, "    groups = _sink_to_users(groups, ops, fed, copied, targets)\n", "", SPLIT + PS),
    Mutation("PS18", "partition: a node moves only where all it reads is at hand (no extra bytes)",
             PARTITION, "                ok = all(\n", "                ok = True or all(\n", SPLIT),
    Mutation("PS19", "partition: stateful nodes stay where they are",
             PARTITION, "if op.op_def.is_stateful or op in pinned", "if op in pinned", SPLIT),
    Mutation("PS20", "partition: a node with users in two partitions stays",
             PARTITION, "        if len(dest) != 1:\n            return None\n        (h,) = dest\n",
             "        if not dest:\n            return None\n        h = max(dest)\n", SPLIT),
]  # fmt: skip
