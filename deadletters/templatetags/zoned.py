"""`{{ value|zoned }}`: a time in the team's zone (TIME_ZONE) with the zone's name, as alerts show
it (deadletters.alerts.text.format_time), so a card and a page say the same time the same way."""

from django import template

from deadletters.alerts.text import format_time

register = template.Library()
register.filter("zoned", format_time)
