"""Bodies refused before they are read, over a real socket.

A client declares a 300 MiB body and sends a few bytes of it: every page but the two import
pages answers 413 from the Content-Length at once, without waiting for the rest (the CSRF check
used to read a multipart body whole first). The import pages keep their larger limit
(`OWNWORDS_MAX_UPLOAD_MB`): a body over the ordinary limit but under theirs reaches them, and one
over theirs gets their own 413 page, also before it is read.
"""
import socket
import time
from urllib.parse import urlsplit

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.test import Client

from experiments.models import Membership, Project, Role, Session

HUGE = 300 * 2**20
BOUNDARY = "----ownwords-test-boundary"
CSRF = "a" * 32  # a CSRF secret sent as the cookie and as the form's token


def post_declaring(url: str, path: str, declared: int, body: bytes, *, cookie: str = "", wait_s: float = 5.0) -> bytes:
    """POST `body` while declaring `declared` bytes; the server's answer within `wait_s`, or b''."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=wait_s) as sock:
        head = (f"POST {path} HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\n"
                f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\nContent-Length: {declared}\r\n"
                + (f"Cookie: {cookie}\r\n" if cookie else "") + "\r\n")
        sock.sendall(head.encode() + body)
        answer, deadline = b"", time.monotonic() + wait_s
        while not complete(answer) and time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            answer += chunk
        return answer


def complete(answer: bytes) -> bool:
    """The answer's head and as much of its body as its Content-Length says."""
    head, sep, body = answer.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return True


def multipart(field: str, payload: bytes, filename: str = "") -> bytes:
    disposition = f'form-data; name="{field}"' + (f'; filename="{filename}"' if filename else "")
    token = f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="csrfmiddlewaretoken"\r\n\r\n{CSRF}\r\n'
    return (token + f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n\r\n").encode() + payload + \
        f"\r\n--{BOUNDARY}--\r\n".encode()


def status_of(answer: bytes) -> int | None:
    line = answer.split(b"\r\n", 1)[0].split()
    return int(line[1]) if len(line) > 1 and line[1].isdigit() else None


@pytest.fixture
def owner_cookie(transactional_db):
    project = Project.objects.create(slug="limits", name="Limits")
    owner = get_user_model().objects.create_user("lim-owner", password="pw-for-tests-only")
    Membership.objects.create(project=project, user=owner, role=Role.OWNER)
    client = Client()
    client.force_login(owner)
    session = client.cookies[django_settings.SESSION_COOKIE_NAME].value
    return f"{django_settings.SESSION_COOKIE_NAME}={session}; {django_settings.CSRF_COOKIE_NAME}={CSRF}"


@pytest.mark.parametrize("path", ["/p/limits/cohorts/draw/", "/p/limits/cohorts/task-list/", "/accounts/login/",
                                  "/p/limits/ratings/1/rate/submit/", "/admin/login/"])
def test_a_huge_declared_body_is_refused_at_once(live_server, owner_cookie, path):
    started = time.monotonic()
    answer = post_declaring(live_server.url, path, HUGE, multipart("size", b"1" * 1024), cookie=owner_cookie)
    took = time.monotonic() - started
    assert status_of(answer) == 413, answer[:300]
    assert took < 3, took
    assert b"Content-Security-Policy" in answer.split(b"\r\n\r\n")[0]  # refusals carry the policy too


def test_the_import_page_keeps_its_larger_limit_and_its_own_refusal(live_server, owner_cookie, settings):
    settings.OWNWORDS_MAX_REQUEST_MB = 1
    settings.OWNWORDS_MAX_UPLOAD_MB = 3
    # 2 MiB: over the ordinary limit, under the import page's: the page reads it (a bad file, a message).
    body = multipart("files", b"not json\n" * (2 * 2**20 // 9), filename="two.jsonl")
    answer = post_declaring(live_server.url, "/p/limits/import/", len(body), body, cookie=owner_cookie, wait_s=30)
    assert status_of(answer) == 200, answer[:300]
    assert b"two.jsonl" in answer  # the page read the file and named it in its message
    # The same body to an ordinary page: 413 from the length.
    answer = post_declaring(live_server.url, "/p/limits/cohorts/task-list/", len(body), body[:1000], cookie=owner_cookie)
    assert status_of(answer) == 413
    # 300 MiB to the import page: its own 413 page, before the body is read.
    answer = post_declaring(live_server.url, "/p/limits/import/", HUGE, body[:1000], cookie=owner_cookie)
    assert status_of(answer) == 413
    assert Session.objects.count() == 0


def test_an_ordinary_post_within_the_limit_still_works(client, cast):
    client.force_login(cast["owner"])
    response = client.post("/p/alpha/cohorts/draw/", {"name": "c", "size": "1", "seed": "1"})
    assert response.status_code in (200, 302)
