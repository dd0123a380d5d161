"""Rater invites: owners make single-use links; whoever opens one becomes a rater of its campaign.

A link carries a token (`annotations.core.invite_codes.token_new`); only its sha256 is stored, and
the token is returned once, to the owner who made it. Accepting locks the invite's row first, so
of two people accepting the same link at the same moment exactly one gets in: the account (new or
existing) becomes a rater of the project through the members service (so the audit log shows it)
and a rater of the campaign, and the invite is marked used, all in one transaction. An existing
member of another role is refused and nothing changes: an invite never changes a role.
Every function raises InviteError with a message for people; on error nothing is written.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mass_mail
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotations.campaigns import CampaignError, rater_add
from annotations.core.invite_codes import token_new, token_sha256
from annotations.models import RaterInvite, RatingCampaign
from experiments.data.audit_log import Kind, audit_write
from experiments.data.members import MembershipError, member_add
from experiments.models import Membership, Role

DEFAULT_INVITE_DAYS = 7
MAX_INVITE_DAYS = 90
OPEN, USED, REVOKED, EXPIRED = "open", "used", "revoked", "expired"
STATE_MESSAGES = {
    USED: "This invitation link has been used already; each link lets in one person. Ask the owner for a new one.",
    REVOKED: "This invitation link was withdrawn by the project's owner. Ask them for a new one.",
    EXPIRED: "This invitation link has expired. Ask the project's owner for a new one.",
}
UNKNOWN_MESSAGE = "This invitation link is not valid: check that it was copied whole, or ask the owner for a new one."


class InviteError(ValueError):
    """Something the person can act on; the message says what. Nothing was written."""


class UsernameTaken(InviteError):
    """The new account's name was taken between the page's check and the insert: an answer about
    which accounts exist, so the page counts it as its own "taken" answers are counted."""


@dataclass(frozen=True)
class NewInvite:
    """An invite just made and its token: the only moment the token exists outside the link."""

    invite: RaterInvite
    token: str


def invite_state(invite: RaterInvite, now=None) -> str:
    if invite.used_at is not None:
        return USED
    if invite.revoked_at is not None:
        return REVOKED
    if invite.expires_at <= (now or timezone.now()):
        return EXPIRED
    return OPEN


def invite_by_token(token: str) -> RaterInvite | None:
    """The invite a link's token opens (any state), with its campaign and project; None if none."""
    if not isinstance(token, str) or not 20 <= len(token) <= 100:
        return None
    return (RaterInvite.objects.select_related("campaign__project")
            .filter(token_sha256=token_sha256(token)).first())


def _check_days(days: int) -> None:
    if not isinstance(days, int) or not 1 <= days <= MAX_INVITE_DAYS:
        raise InviteError(f"an invite lasts 1 to {MAX_INVITE_DAYS} days")


def _make(campaign: RatingCampaign, *, expires_at, email: str, by) -> NewInvite:
    token = token_new()
    invite = RaterInvite.objects.create(campaign=campaign, token_sha256=token_sha256(token), email=email,
                                        created_at=timezone.now(), created_by=by, expires_at=expires_at)
    return NewInvite(invite=invite, token=token)


def _campaign_taking_raters(campaign: RatingCampaign) -> RatingCampaign:
    campaign = RatingCampaign.objects.select_for_update().select_related("project").get(pk=campaign.pk)
    if not campaign.is_open():
        raise InviteError("this campaign is closed: nobody can be invited to rate it")
    return campaign


@transaction.atomic
def invite_create(*, campaign: RatingCampaign, days: int = DEFAULT_INVITE_DAYS, by=None, path: str = "") -> NewInvite:
    """One invite to rate `campaign`, valid for `days` days."""
    _check_days(days)
    campaign = _campaign_taking_raters(campaign)
    made = _make(campaign, expires_at=timezone.now() + timedelta(days=days), email="", by=by)
    audit_write(project=campaign.project, user=by, kind=Kind.MEMBER, path=path,
                target=f"made rater invite {made.invite.pk} to campaign {campaign.name} "
                       f"(valid {days} day{'s' if days != 1 else ''})")
    return made


@transaction.atomic
def invites_create_bulk(*, campaign: RatingCampaign, emails: list[str], days: int = DEFAULT_INVITE_DAYS, by=None,
                        path: str = "") -> list[NewInvite]:
    """One invite per address (all or none), each for `days` days."""
    _check_days(days)
    if not emails:
        raise InviteError("no e-mail address given")
    campaign = _campaign_taking_raters(campaign)
    expires_at = timezone.now() + timedelta(days=days)
    made = [_make(campaign, expires_at=expires_at, email=email, by=by) for email in emails]
    audit_write(project=campaign.project, user=by, kind=Kind.MEMBER, path=path,
                target=f"made {len(made)} rater invites to campaign {campaign.name} from a list of addresses "
                       f"(invites {made[0].invite.pk}–{made[-1].invite.pk}, valid {days} days)")
    return made


@transaction.atomic
def invite_revoke(*, campaign: RatingCampaign, invite_pk: int, by=None, path: str = "") -> RaterInvite:
    """Withdraw an unused invite of `campaign`: its link lets nobody in from now on."""
    invite = RaterInvite.objects.select_for_update().filter(campaign=campaign, pk=invite_pk).first()
    if invite is None:
        raise InviteError("this campaign has no such invite")
    state = invite_state(invite)
    if state in (USED, REVOKED):
        raise InviteError(f"invite {invite.pk} is {state} already")
    invite.revoked_at, invite.revoked_by = timezone.now(), by
    invite.save(update_fields=["revoked_at", "revoked_by"])
    audit_write(project=campaign.project, user=by, kind=Kind.MEMBER, path=path,
                target=f"revoked rater invite {invite.pk} to campaign {campaign.name}")
    return invite


def invite_accept(*, token: str, user=None, new_username: str = "", new_password: str = "",
                  path: str = "") -> tuple:
    """(user, campaign): `user` (signed in already), or a new account `new_username`, made a rater.

    The password of a new account must have passed Django's validators (the page checks them).
    """
    with transaction.atomic():
        return _accept(token, user, new_username, new_password, path)


def _accept(token, user, new_username, new_password, path):
    found = invite_by_token(token)
    if found is None:
        raise InviteError(UNKNOWN_MESSAGE)
    invite = RaterInvite.objects.select_for_update().get(pk=found.pk)  # the one lock two accepts queue on
    state = invite_state(invite)
    if state != OPEN:
        raise InviteError(STATE_MESSAGES[state])
    campaign, project = found.campaign, found.campaign.project
    if user is None:
        try:
            with transaction.atomic():  # a savepoint: only this insert's failure means the name was taken
                user = get_user_model().objects.create_user(username=new_username, password=new_password,
                                                            email=invite.email)
        except IntegrityError:  # taken between the page's check and this insert
            raise UsernameTaken(f"the username {new_username!r} is taken; choose another") from None
    membership = Membership.objects.select_for_update().filter(project=project, user=user).first()
    if membership is not None and membership.role != Role.RATER:
        raise InviteError(f"{user.get_username()} is {membership.get_role_display().lower()} in {project.name}; an "
                          "invite makes raters only and never changes a role, so nothing was changed (the link "
                          "still works for someone else)")
    try:
        if membership is None:
            member_add(project=project, username=user.get_username(), role=Role.RATER, actor=user, path=path)
        rater_add(campaign=campaign, username=user.get_username())
    except (MembershipError, CampaignError) as e:
        raise InviteError(f"{e}; nothing was changed") from None
    invite.used_at, invite.used_by = timezone.now(), user
    invite.save(update_fields=["used_at", "used_by"])
    audit_write(project=project, user=user, kind=Kind.MEMBER, path=path,
                target=f"{user.get_username()} accepted rater invite {invite.pk}: now rates campaign {campaign.name}")
    return user, campaign


def invite_rows(campaign: RatingCampaign) -> list[dict]:
    """The campaign's invites for its owners: number, address, state, dates, who used it."""
    now = timezone.now()
    return [{"pk": i.pk, "email": i.email, "state": invite_state(i, now), "created_at": i.created_at,
             "expires_at": i.expires_at, "used_by": i.used_by.get_username() if i.used_by else "",
             "created_by": i.created_by.get_username() if i.created_by else ""}
            for i in campaign.invites.select_related("used_by", "created_by")]


def mail_configured() -> bool:
    """Whether invites go out by e-mail: only when the administrator set EMAIL_HOST."""
    return bool(getattr(settings, "EMAIL_HOST", ""))


def invite_links_mail(campaign: RatingCampaign, rows: list[tuple[str, str, str]]) -> int:
    """Send each (address, link, expires) by SMTP through django.core.mail; how many went out."""
    subject = f"Invitation to rate answers: {campaign.project.name}, {campaign.name}"
    messages = [(subject, f"You are invited to rate answers in the study {campaign.project.name} "
                          f"(campaign {campaign.name}).\n\nOpen this link to make an account or sign in "
                          f"(it works once, until {expires}):\n{link}\n",
                 None, [address]) for address, link, expires in rows]
    return send_mass_mail(messages, fail_silently=False)
