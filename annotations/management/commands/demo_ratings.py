"""Demo raters and a rating campaign over the demo run (bin/demo runs this after demo_setup)."""
import secrets
import time

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from annotations.campaigns import CampaignError, campaign_create
from annotations.models import RatingCampaign
from experiments.models import Membership, Project, Role, Run

DEMO_RATERS = ["demo-rater-1", "demo-rater-2"]
DEMO_CAMPAIGN = "demo-ratings"


class Command(BaseCommand):
    help = "Add two demo raters to the demo project and a 60-item rating campaign over its finished run."

    def add_arguments(self, parser):
        parser.add_argument("--wait", type=float, default=0.0,
                            help="seconds to wait for the demo run to finish (when it goes through the queue)")

    def handle(self, wait, **options):
        project = Project.objects.filter(slug="demo").first()
        if project is None:
            return "no demo project: run demo_setup first"
        lines = []
        User = get_user_model()
        for username in DEMO_RATERS:
            # As for the other demo logins: a fresh password on every run, printed once.
            password = secrets.token_urlsafe(9)
            user, _ = User.objects.get_or_create(username=username)
            user.set_password(password)
            user.save()
            Membership.objects.update_or_create(project=project, user=user, defaults={"role": Role.RATER})
            lines.append(f"login: {username} / {password}  (rater)")
        if RatingCampaign.objects.filter(project=project, name=DEMO_CAMPAIGN).exists():
            lines.append(f"campaign '{DEMO_CAMPAIGN}' exists already")
            return "\n".join(lines)
        finished = Run.objects.filter(protocol__project=project, status=Run.Status.FINISHED).order_by("-pk")
        deadline = time.monotonic() + wait
        going = Run.objects.filter(protocol__project=project, status__in=[Run.Status.CREATED, Run.Status.RUNNING])
        while not finished.exists() and going.exists() and time.monotonic() < deadline:
            time.sleep(1)
        run = finished.first()
        if run is None:
            lines.append("no finished demo run yet: once it finishes, an owner creates a campaign from "
                         f"/p/{project.slug}/ratings/")
            return "\n".join(lines)
        try:
            campaign = campaign_create(run=run, name=DEMO_CAMPAIGN, conditions=list(run.protocol.conditions),
                                       raters=DEMO_RATERS, sample="stratified", sample_size=60, seed=1)
        except CampaignError as e:
            lines.append(f"no demo campaign: {e}")
        else:
            lines.append(f"campaign '{campaign.name}': {campaign.items.count()} items, 2 raters each; "
                         f"raters rate at /p/{project.slug}/ratings/{campaign.pk}/rate/")
        return "\n".join(lines)
