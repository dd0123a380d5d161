"""Survey studies' pages (issue 16): import (owners), study, run dashboard, respondents' items."""
