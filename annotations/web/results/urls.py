"""URLs of a campaign's agreement, contrasts under human grades and exports."""
urlpatterns = []
