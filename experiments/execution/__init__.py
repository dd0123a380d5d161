"""Running a sealed protocol (paper App. B): policy, the journal's rules, planning, sealing, the driver, owner amendments, progress, the RQ jobs."""
