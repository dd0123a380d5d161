"""A protocol's kind is a field (interview, survey, regrade) and every seal is computed as before it was.

The seal regression constants below were obtained by running this file's tests on commit c437768
(before `Protocol.kind` existed, the kind being inferred from the conditions and `regrade_of`),
printing each `protocol.seal` without its `code_version`, and pasting the values here. They must
never change: sealed protocols keep their seals, and the kind is not part of what a seal hashes.
"""
import importlib

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import IntegrityError, transaction

from experiments.core.canonical import canonical_json, sha256_text
from experiments.core.survey.prompt import MEMORY, OWNWORDS, SCREENER_ONLY
from experiments.execution import control, sealing
from experiments.execution.driver import run_inline
from experiments.execution.kind_table import KINDS, kind_rules
from experiments.models import Cohort, Project, Protocol, Run
from tests.engine_helpers import FUSION, ONE_SHOT, QUESTION_ONLY, build_cohort, make_protocol, make_run
from tests.survey_helpers import SAMPLE

OFFLINE = {"provider": "offline", "base_url": "", "model": "offline-stand-in"}
POLICY = {"cooldown_s": 0.0, "phase_allowance": 7, "max_recoveries_per_slot": 1, "run_http_ceiling": 5000}
CONTRAST = {"name": "fusion - one-shot", "terms": {FUSION: 1, ONE_SHOT: -1}, "family": False, "criterion": None}


def without_code(seal: dict) -> dict:
    return {key: value for key, value in seal.items() if key != "code_version"}


def interview_protocol(project):
    cohort = build_cohort(project, sessions=2, targets=2, name="kinds")
    return make_protocol(project, cohort, conditions=[QUESTION_ONLY, ONE_SHOT, FUSION], generator=OFFLINE,
                         retry_policy=POLICY, concurrency={"offline": 4}, contrasts=[CONTRAST],
                         bootstrap={"draws": 300, "seed": 11}, name="kinds-interview")


def survey_protocol():
    project = Project.objects.create(slug="svy-kinds", name="Survey kinds")
    call_command("import_survey", str(SAMPLE), "--project", project.slug, "--name", "twin", "--synthetic")
    cohort = Cohort.objects.get(project=project, name="twin development")
    return make_protocol(project, cohort, conditions=[SCREENER_ONLY, MEMORY, OWNWORDS], generator=OFFLINE,
                         retry_policy=POLICY, bootstrap={"draws": 200}, name="kinds-survey")


INTERVIEW_SEAL = {
    "prompts": {
        "answer_memory_user": "e3eeac30a6ef2ecd95b8aa82137683ab8a3a48000091eefbcd2d9077c6771cd6",
        "answer_question_only_user": "d0c560f3c3441d47aa079f0cc28859799d9ec27274a71efd5b802c442244e995",
        "decision_layout": "8e7b55b491147da09d6a0735e8d6972621449c9798464fbc7516ac7c7ff0912a",
        "fusion_instruction": "48f3eb68374a19b214c72ffe128cbbcd9c8cf1fea45a4e31f00b7acb46300235",
        "generation_system": "07bba9046c78e2d2000e2b5b0aacdc20013aec4d9714474978790bfa8b8ab6be",
        "judge_system": "dbf2796dd8d7119e930c282e41f5e41a675c84825077550b861dab53d904ec43",
        "judge_user": "954c8714e34e0627d2593b140684dd18542be742ae45c4ced35479c84a132e93",
        "memory_concrete_system": "77df53079a51c7d4304fe08f8b21a0dce497181e3039f8b192b9b4d0a21a7405",
        "memory_concrete_user": "94409417b73a95d7d26be149f07e01348d17c1cc3e437776b028bad3156142cb",
    },
    "task_list_sha256": "4ea05e1c7ac7e2ad7bbfec5520d533b28a748caaed48e96cc7c146c3d9acd4c1",
    "settings_sha256": "d3115121bc3cd17e17561db6d0782db509eb23ec0db0d5b988a1b6d8775ee0b7",
}
SURVEY_SEAL = {
    "prompts": {
        "memory_concrete_system": "77df53079a51c7d4304fe08f8b21a0dce497181e3039f8b192b9b4d0a21a7405",
        "memory_concrete_user": "94409417b73a95d7d26be149f07e01348d17c1cc3e437776b028bad3156142cb",
        "survey_answer_memory_user": "ebc0e8ce1b8161215bb56c46bc90ff9d8ba3f42d68a0b99efa0a7c50b9ef93ac",
        "survey_answer_ownwords_user": "5836780a4998da1dce9b625d672c04218ec1871c4b0088e5b48edce523e87796",
        "survey_answer_screener_user": "e7043c4c5f616683903ea7b2e0d94f63d93ef038975ed490732518e73ed248fe",
        "survey_answer_system": "29ac8952b5a07d6b0a188cf89604c8e3966703f06771f2c952c3f1d0956e7b6c",
    },
    "task_list_sha256": "07b9961b7ec0c01091a5ee0c3df2f5fd97cb699ade4b7e92392a31f631554359",
    "settings_sha256": "ba2a780da32610c15fd1467a1a21b6a49df09e8c9bc943c335c635d6e2efbd04",
}
# The re-grade's seal names its source run's id, which differs from one test database to the next:
# its settings are compared with that id set to 0, its answer list without it.
REGRADE_SEAL = {
    "prompts": {
        "judge_system": "dbf2796dd8d7119e930c282e41f5e41a675c84825077550b861dab53d904ec43",
        "judge_user": "954c8714e34e0627d2593b140684dd18542be742ae45c4ced35479c84a132e93",
    },
    "task_list_sha256": "4ea05e1c7ac7e2ad7bbfec5520d533b28a748caaed48e96cc7c146c3d9acd4c1",
    "regrade": {"answers_sha256": "cb470090d87f2b0fe43a933854356e278dd0a743d4b6c6489049c4492547ae4b", "answers": 8,
                "operational_zeros": 0, "judge": OFFLINE},
}
REGRADE_SETTINGS_WITH_SOURCE_0 = "a44398ccbcb2fcd2ae71123a74ec6fb04c01f35f3f9896f22a0830e02710b86b"


@pytest.mark.django_db
def test_interview_and_survey_seals_are_byte_identical_to_the_old_code(project):
    interview = sealing.protocol_seal(protocol=interview_protocol(project), user=None)
    survey = sealing.protocol_seal(protocol=survey_protocol(), user=None)
    assert without_code(interview.seal) == INTERVIEW_SEAL
    assert without_code(survey.seal) == SURVEY_SEAL
    for protocol in (interview, survey):
        assert sealing.seal_mismatches(protocol) == []


@pytest.mark.django_db(transaction=True)
def test_a_regrade_seal_is_byte_identical_to_the_old_code(project):
    cohort = build_cohort(project, sessions=2, targets=2, name="kinds")
    run = make_run(project, cohort, conditions=[QUESTION_ONLY, ONE_SHOT], generator=OFFLINE, retry_policy=POLICY)
    run = run_inline(run.pk)
    assert run.status == Run.Status.FINISHED, run.status_reason
    regrade = control.regrade_create(source=run, user=None, name="kinds-regrade")
    seal = without_code(regrade.seal)
    assert seal.pop("settings_sha256") == sha256_text(canonical_json(sealing.protocol_settings(regrade)))
    assert regrade.kind == Protocol.Kind.REGRADE and kind_rules(regrade).seals_source
    assert seal["regrade"].pop("source_run") == run.pk
    assert seal == REGRADE_SEAL
    settings = {**sealing.protocol_settings(regrade), "regrade_of": 0}
    assert sha256_text(canonical_json(settings)) == REGRADE_SETTINGS_WITH_SOURCE_0


@pytest.mark.django_db
def test_the_kind_must_agree_with_the_conditions(project):
    interview, survey = interview_protocol(project), survey_protocol()
    assert (interview.kind, survey.kind) == (Protocol.Kind.INTERVIEW, Protocol.Kind.SURVEY)
    survey.kind = Protocol.Kind.INTERVIEW
    with pytest.raises(ValueError, match="a survey protocol, but its kind says interview"):
        survey.save()
    interview.conditions = [SCREENER_ONLY]
    with pytest.raises(ValueError, match="make it a survey protocol"):
        interview.save()
    with pytest.raises(IntegrityError), transaction.atomic():  # the database's own check: a re-grade names its run
        Protocol.objects.filter(pk=interview.pk).update(kind=Protocol.Kind.REGRADE)
    assert set(KINDS) == set(Protocol.Kind.values)


@pytest.mark.django_db
def test_the_migration_fills_the_kind_as_the_old_inference_said(project):
    interview, survey = interview_protocol(project), survey_protocol()
    Protocol.objects.filter(pk__in=[interview.pk, survey.pk]).update(kind=Protocol.Kind.INTERVIEW)
    migration = importlib.import_module("experiments.migrations.0024_protocol_kind")
    migration.fill_kinds(apps, None)
    kinds = dict(Protocol.objects.values_list("pk", "kind"))
    assert (kinds[interview.pk], kinds[survey.pk]) == (Protocol.Kind.INTERVIEW, Protocol.Kind.SURVEY)
