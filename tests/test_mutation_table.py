"""The mutation check (`python -m tests.hostile.mutations`, several minutes: not part of the
default run) breaks the code on purpose and expects a test to go red. Its table names exact
source text; this fast test keeps the table current, so that a refactoring which changes a
mutated line shows up here instead of as a STALE mutation nobody runs."""

import os

import pytest

# tests/ is on sys.path (the conftest folder), the repository root only under `python -m`.
from hostile.mutations import ROOT, all_mutations

MUTATIONS = all_mutations()


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.id for m in MUTATIONS])
def test_each_mutation_names_text_that_occurs_exactly_once(mutation):
    with open(os.path.join(ROOT, mutation.path), encoding="utf-8") as f:
        source = f.read()
    assert source.count(mutation.old) == 1, f"{mutation.id}: {mutation.feature} is stale"
    for test in mutation.tests:  # a file, or a pytest node id in one
        path = test.split("::", 1)[0]
        assert os.path.exists(os.path.join(ROOT, path)), f"{mutation.id}: no {path}"


def test_mutation_ids_are_unique():
    ids = [m.id for m in MUTATIONS]
    assert len(ids) == len(set(ids))
