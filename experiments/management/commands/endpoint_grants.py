"""endpoint_grants: the administrator's grants to spend on paid endpoints.

    manage.py endpoint_grants list [ENDPOINT]
    manage.py endpoint_grants grant ENDPOINT (--user NAME | --group NAME) [--note TEXT]
    manage.py endpoint_grants revoke ENDPOINT (--user NAME | --group NAME)

ENDPOINT is a name of OWNWORDS_LLM_ENDPOINTS; the offline stand-in is free for all and takes no grant.
"""
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError

from experiments.execution.endpoints import OFFLINE, configured_endpoints, endpoint_by_name
from experiments.models import EndpointGrant


class Command(BaseCommand):
    help = "List, grant or revoke who may seal and start runs against a paid endpoint of OWNWORDS_LLM_ENDPOINTS."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["list", "grant", "revoke"])
        parser.add_argument("endpoint", nargs="?", help="an endpoint's name in OWNWORDS_LLM_ENDPOINTS")
        holder = parser.add_mutually_exclusive_group()
        holder.add_argument("--user", help="the username the grant is for")
        holder.add_argument("--group", help="the group the grant is for (each of its members)")
        parser.add_argument("--note", default="", help="why, kept with the grant")

    def handle(self, action, endpoint=None, user=None, group=None, note="", **options):
        if action == "list":
            return self._list(endpoint)
        if not endpoint:
            raise CommandError(f"{action}: name the endpoint ({_names()})")
        if action == "grant":
            _paid_endpoint(endpoint)  # a revoke may name an endpoint the list no longer has
        if not (user or group):
            raise CommandError(f"{action}: give --user NAME or --group NAME")
        holder = {"user": _user(user)} if user else {"group": _group(group)}
        if action == "grant":
            grant, created = EndpointGrant.objects.get_or_create(endpoint=endpoint, **holder,
                                                                 defaults={"note": note[:500]})
            return f"{'granted' if created else 'already granted'}: {grant}"
        deleted, _ = EndpointGrant.objects.filter(endpoint=endpoint, **holder).delete()
        if not deleted:
            raise CommandError(f"no such grant: {endpoint} for {user or group}; nothing changed")
        return f"revoked: {endpoint} for {'user ' + user if user else 'group ' + group}"

    def _list(self, endpoint):
        grants = EndpointGrant.objects.select_related("user", "group").order_by("endpoint", "user__username",
                                                                                 "group__name")
        if endpoint:
            grants = grants.filter(endpoint=endpoint)
        listed = {e.name for e in configured_endpoints()}
        lines = [f"{g}{'' if g.endpoint in listed else '  (no longer in OWNWORDS_LLM_ENDPOINTS)'}"
                 f"{f'  — {g.note}' if g.note else ''}" for g in grants]
        return "\n".join(lines) if lines else "no grants: only superusers spend on paid endpoints"


def _names() -> str:
    return ", ".join(e.name for e in configured_endpoints() if e.provider != OFFLINE) or "the list has none"


def _paid_endpoint(name: str):
    endpoint = endpoint_by_name(name)
    if endpoint is None:
        raise CommandError(f"no endpoint named {name!r} in OWNWORDS_LLM_ENDPOINTS (paid ones: {_names()})")
    if endpoint.provider == OFFLINE:
        raise CommandError(f"{name} is the offline stand-in: free for all, it takes no grant")
    return endpoint


def _user(username: str):
    found = get_user_model().objects.filter(username=username).first()
    if found is None:
        raise CommandError(f"no user named {username!r}; nothing changed")
    return found


def _group(name: str):
    found = Group.objects.filter(name=name).first()
    if found is None:
        raise CommandError(f"no group named {name!r}; nothing changed")
    return found
