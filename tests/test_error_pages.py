"""403 and 404 answers are pages of the site, with its layout and a way back; the favicon is served."""
from django.contrib.staticfiles import finders


def test_a_missing_project_is_a_friendly_404(client, cast):
    client.force_login(cast["viewer"])
    response = client.get("/p/no-such-project/")
    body = response.content.decode()
    assert response.status_code == 404
    assert "OwnWords Lab" in body and "not a member" in body and "Your projects" in body


def test_a_role_refusal_is_a_friendly_403_that_names_the_role(client, cast, project):
    client.force_login(cast["viewer"])
    response = client.get(f"/p/{project.slug}/import/")
    body = response.content.decode()
    assert response.status_code == 403
    assert "The viewer role cannot use this page" in body and "Ask an owner" in body


def test_the_layout_links_a_favicon_that_exists(client, cast):
    client.force_login(cast["viewer"])
    body = client.get("/").content.decode()
    assert 'rel="icon"' in body and finders.find("favicon.svg")
