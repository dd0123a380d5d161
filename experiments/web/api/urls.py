"""The account page of API tokens (the API itself is mounted at /api/v1/ by ownwords_site/urls.py)."""
from django.urls import path

from experiments.web.api import tokens_page

urlpatterns = [
    path("account/tokens/", tokens_page.api_tokens, name="api_tokens"),
    path("account/tokens/<int:pk>/revoke/", tokens_page.api_token_revoke, name="api_token_revoke"),
]
