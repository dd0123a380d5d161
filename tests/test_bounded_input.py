"""Bounded input: every JSON field of the app's forms has a size and a nesting
limit, every integer field a range that fits its column; each is refused with a clear form error
and nothing changes (criteria of 5,000 nested brackets ended in RecursionError, a 500)."""
import importlib
import inspect
import pkgutil

import pytest
from django import forms
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

import annotations.web
import experiments.web
from experiments.core.bounded_json import JSONInputError, bounded_json, nesting_depth
from experiments.data.sessions import cohort_draw
from experiments.models import Cohort, Protocol
from experiments.web.bounded_input import BIG_INTEGER_COLUMN_MAX, BoundedIntegerField, BoundedJSONField
from tests.test_pages_runs import protocol_form_data

DEEP = "[" * 5000 + "]" * 5000


@pytest.fixture
def cohort(imported, cast):
    return cohort_draw(project=imported, name="c1", size=2, seed=1)


def test_criteria_of_5000_nested_brackets_are_refused_with_a_form_error(client, cast, cohort):
    client.force_login(cast["owner"])
    response = client.post(reverse("protocol_create", args=["alpha"]), protocol_form_data(cohort, criteria=DEEP))
    assert response.status_code == 200
    assert "nested too deeply: at most 32 levels" in response.content.decode()
    assert not Protocol.objects.exists()


def test_criteria_longer_than_the_field_are_refused_before_parsing(client, cast, cohort):
    client.force_login(cast["owner"])
    long_text = "[" + ",".join(["1"] * 15_000) + "]"
    response = client.post(reverse("protocol_create", args=["alpha"]), protocol_form_data(cohort, criteria=long_text))
    assert response.status_code == 200 and "too long: at most 20,000 characters" in response.content.decode()
    assert not Protocol.objects.exists()


@pytest.mark.parametrize("field", ["bootstrap_seed", "bootstrap_draws", "phase_allowance", "max_recoveries_per_slot"])
def test_a_30_digit_number_is_a_form_error(client, cast, cohort, field):
    client.force_login(cast["owner"])
    response = client.post(reverse("protocol_create", args=["alpha"]),
                           protocol_form_data(cohort, **{field: "9" * 30}))
    assert response.status_code == 200 and "at most " in response.content.decode()
    assert not Protocol.objects.exists()


@pytest.mark.parametrize("size, seed", [("9" * 30, "1"), ("2", "9" * 30), ("2", "9" * 5000)])
def test_a_cohort_draw_refuses_numbers_out_of_range(client, cast, imported, size, seed):
    client.force_login(cast["owner"])
    response = client.post(reverse("cohort_draw", args=["alpha"]), {"name": "big", "size": size, "seed": seed},
                           follow=True)
    body = response.content.decode()
    assert response.status_code == 200 and "No cohort drawn" in body
    assert "at most " in body or "a whole number from" in body
    assert not Cohort.objects.filter(name="big").exists()


def test_a_ready_made_protocol_with_a_30_digit_cohort_id_is_refused(client, cast, cohort):
    client.force_login(cast["owner"])
    response = client.post(reverse("protocol_from_template", args=["alpha"]),
                           {"template": "confirmation", "cohort": "9" * 30}, follow=True)
    # The view says "Nothing was created" (or the request gate refuses the id before it: 400).
    assert response.status_code in (200, 400)
    assert response.status_code == 400 or "Nothing was created" in response.content.decode()
    assert not Protocol.objects.exists()


def test_a_command_refuses_a_deeply_nested_file(tmp_path, imported):
    path = tmp_path / "protocol.json"
    path.write_text('{"name": "deep", "criteria": ' + DEEP + "}", encoding="utf-8")
    with pytest.raises(CommandError, match="nested too deeply"):
        call_command("protocol_create", str(path), project="alpha")
    assert not Protocol.objects.exists()


# --- the one helper, used everywhere ---------------------------------------------------------

def app_form_classes():
    """Every form class defined in the web areas of both apps."""
    found = []
    for info in [*pkgutil.walk_packages(experiments.web.__path__, "experiments.web."),
                 *pkgutil.walk_packages(annotations.web.__path__, "annotations.web.")]:
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, forms.BaseForm) and cls.__module__ == module.__name__:
                found.append(cls)
    return found


def test_every_integer_and_json_field_of_the_apps_forms_is_bounded():
    classes = app_form_classes()
    assert len(classes) > 8
    problems = []
    for cls in classes:
        for name, field in cls.base_fields.items():
            where = f"{cls.__module__}.{cls.__name__}.{name}"
            if isinstance(field, (forms.FloatField, forms.DecimalField)):
                if field.min_value is None or field.max_value is None:
                    problems.append(f"{where} has no range")
            elif isinstance(field, forms.IntegerField):
                if not isinstance(field, BoundedIntegerField):
                    problems.append(f"{where} is not a BoundedIntegerField")
                elif not (field.min_value is not None and field.max_value <= BIG_INTEGER_COLUMN_MAX):
                    problems.append(f"{where} has no range")
            if "json" in (str(field.label or "") + name).lower() and not isinstance(field, BoundedJSONField):
                problems.append(f"{where} takes JSON but is not a BoundedJSONField")
    assert problems == []


def test_nesting_is_counted_outside_strings_only():
    assert nesting_depth('{"a": [1, {"b": "[[[[{{{"}]}') == 3
    assert nesting_depth('"\\"[[["') == 0
    assert bounded_json('{"all": [{"any": []}]}', max_chars=100) == {"all": [{"any": []}]}
    with pytest.raises(JSONInputError, match="not JSON"):
        bounded_json("{", max_chars=100)
    with pytest.raises(JSONInputError, match="nested too deeply"):
        bounded_json("[" * 33 + "]" * 33, max_chars=100)
