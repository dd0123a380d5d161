"""What Django's error reports may show: the secrets marked on a view stay hidden with DEBUG on too.

Django's `SafeExceptionReporterFilter` hides the POST fields named by `sensitive_post_parameters`
(and the locals named by `sensitive_variables`) only when DEBUG is off: "if DEBUG is True then your
site is not safe anyway". The demo runs with DEBUG=1, and a 500 on the protocol form then showed a
pasted key in the debug page's POST table; so does the login page a password.
This filter is always active; settings are cleansed as Django does.
"""
from django.views.debug import SafeExceptionReporterFilter


class SecretsHiddenEvenInDebug(SafeExceptionReporterFilter):
    def is_active(self, request):
        return True
