"""The README's main command, inline (no queue): data, cohort, logins and a finished run."""
import re
from io import StringIO

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command

from experiments.models import Cohort, Run, Session, Task, Turn

pytestmark = pytest.mark.slow


def test_demo_setup_loads_the_sample_and_lands_on_a_finished_offline_run(db):
    out = StringIO()
    call_command("demo_setup", stdout=out)
    text = out.getvalue()
    assert Session.objects.count() == 251 and Turn.objects.count() == 5088 + 227
    assert Task.objects.count() == 814  # the demo's looser rule: 8 pairs, 3 targets
    assert Cohort.objects.get(name="demo").cohort_tasks.count() > 0
    run = Run.objects.get()
    assert run.status == Run.Status.FINISHED and run.inline
    assert "offline stand-in, not a model" in text
    logins = dict(re.findall(r"login: (\S+) / (\S+)", text))
    assert set(logins) == {"demo", "demo-viewer"}
    assert authenticate(username="demo", password=logins["demo"]) is not None
    # Running it again imports nothing twice and starts no second run.
    call_command("demo_setup", stdout=StringIO())
    assert Session.objects.count() == 251 and Run.objects.count() == 1
