"""Prespecified criteria on the protocol form and in protocol_create: stored when valid, refused with a clear message."""
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from experiments.data.sessions import cohort_draw
from experiments.models import Protocol
from tests.test_pages_runs import MEMORY, OWNWORDS, protocol_form_data

GOOD = [{"name": "OwnWords wins", "contrast": f"{OWNWORDS} - {MEMORY}", "interval": "family", "above": 0}]


@pytest.fixture
def world(imported, cast):
    return {"project": imported, "cohort": cohort_draw(project=imported, name="c1", size=2, seed=1), "users": cast}


def post(client, world, criteria_text):
    client.force_login(world["users"]["owner"])
    data = protocol_form_data(world["cohort"], conditions=[MEMORY, OWNWORDS],
                              contrasts=[{"first": OWNWORDS, "second": MEMORY, "family": "on"}])
    return client.post(reverse("protocol_create", args=["alpha"]), {**data, "criteria": criteria_text})


def test_valid_criteria_are_stored_and_shown_again(client, world):
    assert post(client, world, json.dumps(GOOD)).status_code == 302
    protocol = Protocol.objects.get(name="p-new")
    assert protocol.criteria == GOOD
    body = client.get(reverse("protocol_edit", args=["alpha", protocol.pk])).content.decode()
    assert "OwnWords wins" in body.split('id="criteria-field"')[1]


@pytest.mark.parametrize("text, message", [
    ("[{", "not JSON"),
    (json.dumps([{**GOOD[0], "contrast": "nope"}]), "is not a planned contrast"),
    (json.dumps([{**GOOD[0], "above": "zero"}]), "must be a finite number"),
])
def test_bad_criteria_are_refused_and_nothing_is_stored(client, world, text, message):
    response = post(client, world, text)
    assert response.status_code == 200 and message in response.content.decode()
    assert not Protocol.objects.filter(name="p-new").exists()


def test_protocol_create_takes_criteria_and_refuses_bad_ones(world, tmp_path):
    spec = {"name": "cli", "cohort": "c1", "conditions": [MEMORY, OWNWORDS],
            "generator": {"provider": "offline", "base_url": "", "model": "offline-stand-in"},
            "judge": {"provider": "offline", "base_url": "", "model": "offline-stand-in"},
            "contrasts": [f"{OWNWORDS} - {MEMORY} [family]"], "criteria": GOOD}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(spec))
    call_command("protocol_create", str(path), "--project", "alpha")
    assert Protocol.objects.get(name="cli").criteria == GOOD
    spec.update(name="cli-2", criteria=[{"name": "x", "all": "everything"}])
    path.write_text(json.dumps(spec))
    with pytest.raises(CommandError, match="non-empty list of rules"):
        call_command("protocol_create", str(path), "--project", "alpha")
    assert not Protocol.objects.filter(name="cli-2").exists()
