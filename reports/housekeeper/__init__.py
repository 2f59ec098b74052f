"""The housekeeper: one process (`manage.py housekeeper`) that runs every periodic duty of the
house from one home. duties.py lists them with their intervals, loop.py runs them and rides out
outages, reaper.py holds the two recovery duties (lapsed leases, lost jobs)."""
