"""import_sessions: a file (JSONL, Anthropic CSV) or a genagents folder into a project, all or nothing.

A file is read as a stream and stored in batches (`data.sessions_import`), so its size is
bounded by the disk, not by memory.
"""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from experiments.core.interviews.readers import FORMATS, guess_format, stream_interview_path
from experiments.core.interviews.records import InterviewFileError, printable, unstorable_text_problem
from experiments.data.members import MembershipError, project_for_command
from experiments.data.sessions import sessions_import
from experiments.core.tasks import TaskRule


class Command(BaseCommand):
    help = "Import interview sessions from a JSONL file, an Anthropic Interviewer CSV or a genagents folder."

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path)
        parser.add_argument("--project", required=True, help="project slug (created if missing)")
        parser.add_argument("--owner", help="username of the owner of a project this creates (audited)")
        parser.add_argument("--format", choices=FORMATS, help="guessed from the file when omitted")
        parser.add_argument("--min-pairs", type=int, help="task rule for the derivation after import")
        parser.add_argument("--min-targets", type=int)
        parser.add_argument("--max-targets", type=int)

    def handle(self, path, project, owner, format, min_pairs, min_targets, max_targets, **options):
        if problem := unstorable_text_problem(project):
            raise CommandError(f"--project {printable(project)!r} {problem}")
        try:
            fmt = format or guess_format(path)
            parsed = stream_interview_path(path, fmt)
        except InterviewFileError as exc:
            raise CommandError(f"nothing imported:\n{exc}") from None
        rule = None
        if any(v is not None for v in (min_pairs, min_targets, max_targets)):
            defaults = TaskRule()
            try:
                rule = TaskRule(
                    min_pairs if min_pairs is not None else defaults.min_pairs,
                    min_targets if min_targets is not None else defaults.min_targets,
                    max_targets if max_targets is not None else defaults.max_targets,
                )
            except ValueError as exc:
                raise CommandError(str(exc)) from None
        try:
            # The file is read while it is stored: a project made for it goes if the file is refused.
            with transaction.atomic():
                target, note = project_for_command(slug=project, owner=owner)
                summary = sessions_import(
                    project=target,
                    parsed=parsed,
                    source_format=fmt,
                    source_file=path.name,
                    task_rule=rule,
                )
        except InterviewFileError as exc:
            raise CommandError(f"nothing imported:\n{exc}") from None
        except MembershipError as exc:
            raise CommandError(f"nothing imported: {exc}") from None
        return "\n".join(filter(None, [f"{printable(path.name)}: {summary}", note]))
