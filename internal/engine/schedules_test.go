package engine

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestCronMessages is the table of specs a user may type and what they are told: the
// spec's flag, the spec, and why (the part of the message after the quoted spec).
func TestCronMessages(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		// accepted
		{"0 * * * *", ""},
		{"*/15 9-17 * * MON-FRI", ""},
		{"0 0 1,15 * *", ""},
		{"30 2 * JAN,jul sun", ""},
		{"0 0 * * 7", ""},
		{"5/20 0 * * *", ""},
		{"0 12 29 2 *", ""},     // Feb 29 comes every four years
		{"0 0 13 * FRI", ""},    // Friday the 13th: both must match
		{"0 0 30,31 2,4 *", ""}, // April 30
		{"  0 0 1 1 *  ", ""},   // spaces around
		{"@hourly", ""}, {"@daily", ""}, {"@midnight", ""}, {"@weekly", ""}, {"@monthly", ""}, {"@yearly", ""}, {"@annually", ""},
		{"@every 30m", ""}, {"@every 36h", ""}, {"@every 6h/30m", ""},
		// refused
		{"", `--cron "": is empty; give five fields: minute hour day-of-month month day-of-week, e.g. "0 * * * *" for hourly, or one of @hourly @daily @midnight @weekly @monthly @yearly @annually, or @every DURATION (e.g. @every 30m)`},
		{"* * * *", `--cron "* * * *": has 4 fields; give five fields: minute hour`},
		{"0 0 0 1 1 * 2030", `--cron "0 0 0 1 1 * 2030": has 7 fields (seconds and year fields are not accepted); give five fields`},
		{"0 0 1 1 * 2030", `has 6 fields (seconds and year fields are not accepted)`},
		{"0 0 31 2 *", `--cron "0 0 31 2 *": never fires: day-of-month 31 does not exist in February (29 days at most)`},
		{"0 0 30 2 *", `--cron "0 0 30 2 *": never fires: day-of-month 30 does not exist in February (29 days at most)`},
		{"0 0 31 4,6 *", `never fires: day-of-month 31 does not exist in April (30 days at most) or June (30 days at most)`},
		{"61 * * * *", `--cron "61 * * * *": minute 61 is out of range: minute takes 0-59`},
		{"0 24 * * *", `hour 24 is out of range: hour takes 0-23`},
		{"0 0 0 * *", `day-of-month 0 is out of range: day-of-month takes 1-31`},
		{"0 0 32 * *", `day-of-month 32 is out of range: day-of-month takes 1-31`},
		{"0 0 * 13 *", `month 13 is out of range: month takes 1-12 or JAN-DEC`},
		{"0 0 * * 8", `day-of-week 8 is out of range: day-of-week takes 0-7 (0 and 7 are Sunday) or SUN-SAT`},
		{"0 0 * FOO *", `month "FOO" is not a month: month takes 1-12 or JAN-DEC`},
		{"0 0 * * XYZ", `day-of-week "XYZ" is not a day of the week: day-of-week takes 0-7 (0 and 7 are Sunday) or SUN-SAT`},
		{"x * * * *", `minute "x" is not a number: minute takes 0-59`},
		{"? * * * *", `minute "?" is not a number`},
		{"0 0 L * *", `day-of-month "L" is not a number`},
		{"*/0 * * * *", `minute step "0": give a whole number of 1 or more`},
		{"*/60 * * * *", `minute step 60 is larger than the field's range 0-59`},
		{"0 17-9 * * *", `hour range 17-9 ends before it starts (ranges do not wrap around)`},
		{"0 1-,3 * * *", `hour has a range with an end missing`},
		{"0 1,,3 * * *", `hour "1,,3" has an empty list item`},
		{"0 0 * * MON#2", `'#' is not accepted: Temporal reads the rest as a comment`},
		{"CRON_TZ=Europe/Paris 0 9 * * *", `time zone prefixes are not accepted: give the zone apart (--tz, or time_zone in the API), e.g. Europe/Paris`},
		{"@reboot", `--cron "@reboot": unknown descriptor @reboot; the descriptors are @yearly @annually @monthly @weekly @daily @midnight @hourly, and @every DURATION`},
		{"@every", `@every needs a duration, e.g. @every 30m or @every 6h`},
		{"@every 1s", `--cron "@every 1s": @every 1s is shorter than the 1m minimum`},
		{"@every soon", `@every soon: give a duration like 30m, 6h or 36h`},
		{"@every 1h/2h", `@every 1h/2h: offset 2h is not shorter than the interval 1h`},
	} {
		err := ScheduleConfig{Cron: c.spec}.Validate()
		if c.want == "" {
			if err != nil {
				t.Errorf("%q refused: %v", c.spec, err)
			}
			continue
		}
		var se *ScheduleError
		if !errors.As(err, &se) || se.Field != "cron" {
			t.Errorf("%q: %v, want a cron error", c.spec, err)
			continue
		}
		if !strings.Contains(se.FlagError(), c.want) {
			t.Errorf("%q:\n got %s\nwant %s", c.spec, se.FlagError(), c.want)
		}
	}
}

// The other settings, each refused with its field and the values it takes.
func TestScheduleConfigMessages(t *testing.T) {
	for _, c := range []struct {
		cfg         ScheduleConfig
		field, want string
	}{
		{ScheduleConfig{Cron: "@daily", Overlap: "sometimes"}, "overlap", `--overlap "sometimes": must be one of skip, buffer-one, buffer-all, cancel-other, terminate-other, allow-all`},
		{ScheduleConfig{Cron: "@daily", CatchupWindow: time.Second}, "catchup_window", `--catchup-window "1s": must be 10s or more`},
		{ScheduleConfig{Cron: "@daily", CatchupWindow: -time.Minute}, "catchup_window", `--catchup-window "-1m0s": must be 10s or more`},
		{ScheduleConfig{Cron: "@daily", Jitter: -time.Second}, "jitter", `--jitter "-1s": must be 0 or more`},
		{ScheduleConfig{Cron: "0 2 * * *", TimeZone: "Asia/Shangai"}, "time_zone", `--tz "Asia/Shangai": unknown time zone; did you mean Asia/Shanghai? give an IANA name such as Europe/Berlin, America/New_York or Asia/Shanghai`},
		{ScheduleConfig{Cron: "0 2 * * *", TimeZone: "america/new_york"}, "time_zone", `unknown time zone; did you mean America/New_York?`},
		{ScheduleConfig{Cron: "0 2 * * *", TimeZone: "utc"}, "time_zone", `--tz "utc": unknown time zone; did you mean UTC?`},
		{ScheduleConfig{Cron: "0 2 * * *", TimeZone: "UTC+8"}, "time_zone", `unknown time zone; did you mean Etc/GMT-8 (a fixed offset, no daylight saving; Etc names reverse the sign)?`},
		{ScheduleConfig{Cron: "0 2 * * *", TimeZone: "Mars/Olympus"}, "time_zone", `--tz "Mars/Olympus": unknown time zone; give an IANA name such as Europe/Berlin`},
		{ScheduleConfig{Cron: "0 2 * * *", TimeZone: "Local"}, "time_zone", `Local would be the zone of whichever machine reads it`},
		{ScheduleConfig{Cron: "@every 6h", TimeZone: "Europe/Berlin"}, "time_zone", `--tz "Europe/Berlin": does not apply to @every: intervals count from the Unix epoch, not from a local clock; to fire at a local time give five fields, e.g. "0 2 * * *", or leave the time zone out`},
	} {
		var se *ScheduleError
		if err := c.cfg.Validate(); !errors.As(err, &se) || se.Field != c.field || !strings.Contains(se.FlagError(), c.want) {
			t.Errorf("%+v: %v, want %s: %s", c.cfg, err, c.field, c.want)
		}
	}
	for _, tz := range []string{"", "UTC", "Asia/Shanghai", "America/New_York", "Asia/Kolkata", " Europe/Berlin "} {
		if err := (ScheduleConfig{Cron: "0 2 * * *", TimeZone: tz}).Validate(); err != nil {
			t.Errorf("time zone %q: %v", tz, err)
		}
	}
	for _, o := range OverlapPolicies {
		if err := (ScheduleConfig{Cron: "@daily", Overlap: o, CatchupWindow: time.Minute, Jitter: time.Second, PauseOnFailure: true}).Validate(); err != nil {
			t.Errorf("overlap %s: %v", o, err)
		}
	}
	if _, err := ParseScheduleDuration("jitter", "5"); err == nil || !strings.Contains(err.Error(), `jitter "5": give a duration with a unit`) {
		t.Errorf("jitter 5: %v", err)
	}
	if _, err := ParseBackfillTime("from", "yesterday"); err == nil || err.(*ScheduleError).FlagError() != `--from "yesterday": give an RFC 3339 time, e.g. 2026-01-02T15:04:05Z or 2026-01-02T16:04:05+01:00` {
		t.Errorf("from yesterday: %v", err)
	}
}

// Next and Count read a spec as Temporal does: in UTC, day-of-month and day-of-week both.
func TestCronNext(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 7, 30, 0, time.UTC) // a Sunday
	for _, c := range []struct {
		spec string
		want time.Time
	}{
		{"0 * * * *", time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)},
		{"*/15 * * * *", time.Date(2026, 3, 1, 10, 15, 0, 0, time.UTC)},
		{"0 9 * * MON-FRI", time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)},
		{"0 0 13 * FRI", time.Date(2026, 3, 13, 0, 0, 0, 0, time.UTC)},
		{"0 0 29 2 *", time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC)},
		{"@yearly", time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"0 0 * * 7", time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC)},
		{"@every 6h", time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)},
		{"@every 6h/30m", time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC)},
	} {
		spec, err := ParseCron(c.spec)
		if err != nil {
			t.Fatalf("%s: %v", c.spec, err)
		}
		if got := spec.Next(at); !got.Equal(c.want) {
			t.Errorf("%s after %s: %s, want %s", c.spec, at, got, c.want)
		}
	}
	spec, _ := ParseCron("0 * * * *")
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	if n := spec.Count(from, from.Add(3*time.Hour), 100); n != 4 {
		t.Errorf("hourly over [00:00, 03:00]: %d firings, want 4", n)
	}
	if n := spec.Count(from, from.AddDate(1, 0, 0), 100); n != 101 {
		t.Errorf("counting stops past the cap: %d, want 101", n)
	}
}

// In a zone the fields are read on its clock, daylight saving included, and Count
// counts the local firings.
func TestCronNextInZone(t *testing.T) {
	zone := func(name string) *time.Location {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		return loc
	}
	for _, c := range []struct {
		spec, zone  string
		after, want time.Time
	}{
		// 02:00 in Shanghai (UTC+8, no DST) is 18:00 UTC the day before.
		{"0 2 * * *", "Asia/Shanghai", time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), time.Date(2026, 3, 1, 18, 0, 0, 0, time.UTC)},
		// 09:00 New York: EST (UTC-5) before 8 March 2026, EDT (UTC-4) after.
		{"0 9 * * *", "America/New_York", time.Date(2026, 3, 6, 15, 0, 0, 0, time.UTC), time.Date(2026, 3, 7, 14, 0, 0, 0, time.UTC)},
		{"0 9 * * *", "America/New_York", time.Date(2026, 3, 7, 15, 0, 0, 0, time.UTC), time.Date(2026, 3, 8, 13, 0, 0, 0, time.UTC)},
		// 02:30 does not exist in New York on 8 March 2026: the next is the 9th.
		{"30 2 * * *", "America/New_York", time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC), time.Date(2026, 3, 9, 6, 30, 0, 0, time.UTC)},
		// Hours in Kolkata start at :30 UTC.
		{"0 * * * *", "Asia/Kolkata", time.Date(2026, 3, 1, 10, 7, 0, 0, time.UTC), time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC)},
		// Monday 06:30 in Shanghai is Sunday 22:30 UTC.
		{"30 6 * * MON", "Asia/Shanghai", time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 1, 22, 30, 0, 0, time.UTC)},
	} {
		spec, err := ParseCron(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		spec.Location = zone(c.zone)
		if got := spec.Next(c.after); !got.Equal(c.want) {
			t.Errorf("%s %s after %s: %s, want %s", c.spec, c.zone, c.after, got, c.want)
		}
	}
	// 01:30 comes twice in New York on 1 November 2026 (EDT, then EST): Temporal matches
	// the clock literally and fires at both.
	spec, _ := ParseCron("30 1 * * *")
	spec.Location = zone("America/New_York")
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	if n := spec.Count(from, from.Add(24*time.Hour), 10); n != 2 {
		t.Errorf("01:30 New York on the day the clocks go back: %d firings, want 2", n)
	}
}
