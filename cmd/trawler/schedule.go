package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"trawler/internal/engine"
)

func scheduleCmd(s *settings) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Run chains on cron schedules (Temporal Schedules)",
		Long: `Schedules start a chain run on a cron spec, durably: Temporal keeps them, not the CLI,
so they fire whether or not this command runs. Each firing is a normal run; list them
with ` + "`trawler status`" + `. Overlapping firings are skipped while the previous run is still going.`,
	}
	var sets []string
	var cron string
	create := &cobra.Command{
		Use:   "create NAME FILE --cron SPEC",
		Short: "Create a schedule that runs FILE on a cron spec",
		Example: `  trawler schedule create hn-hourly examples/hackernews.yaml --cron "0 * * * *" --data .data/dev
  trawler schedule create demo-5m examples/demo.yaml --cron "*/5 * * * *" --set feed.pages=2`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cron == "" {
				return fmt.Errorf("--cron is required, e.g. --cron \"0 * * * *\" for hourly")
			}
			plan, err := s.loadChainFile(args[1], sets)
			if err != nil {
				return err
			}
			c, err := s.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			if err := engine.CreateSchedule(cmd.Context(), c, args[0], cron, plan, engine.RunOptions{TaskQueue: s.taskQueue}); err != nil {
				return err
			}
			if s.json {
				return printJSON(map[string]string{"schedule": args[0], "cron": cron, "chain": plan.Chain})
			}
			fmt.Printf("schedule %s runs chain %s on %q\n", args[0], plan.Chain, cron)
			return nil
		},
	}
	create.Flags().StringVar(&cron, "cron", "", "cron spec: minute hour day-of-month month day-of-week")
	create.Flags().StringArrayVar(&sets, "set", nil, "override a param: step.param=value or param=value (repeatable)")

	list := &cobra.Command{
		Use:   "list",
		Short: "List schedules",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := s.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			it, err := c.ScheduleClient().List(cmd.Context(), client.ScheduleListOptions{})
			if err != nil {
				return err
			}
			type row struct {
				ID     string   `json:"id"`
				Cron   []string `json:"cron,omitempty"`
				Paused bool     `json:"paused"`
				Next   string   `json:"next,omitempty"`
			}
			var rows []row
			for it.HasNext() {
				e, err := it.Next()
				if err != nil {
					return err
				}
				r := row{ID: e.ID, Paused: e.Paused}
				if e.Spec != nil {
					r.Cron = e.Spec.CronExpressions
				}
				if len(e.NextActionTimes) > 0 {
					r.Next = e.NextActionTimes[0].Local().Format("2006-01-02 15:04:05")
				}
				rows = append(rows, r)
			}
			if s.json {
				return printJSON(rows)
			}
			if len(rows) == 0 {
				fmt.Println("no schedules; create one with `trawler schedule create NAME FILE --cron SPEC`")
			}
			for _, r := range rows {
				fmt.Printf("%-24s next %-20s paused=%v %s\n", r.ID, r.Next, r.Paused, strings.Join(r.Cron, " | "))
			}
			return nil
		},
	}
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a schedule (runs it already started keep going)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := s.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.ScheduleClient().GetHandle(cmd.Context(), args[0]).Delete(cmd.Context()); err != nil {
				return fmt.Errorf("delete schedule %s: %w", args[0], err)
			}
			if s.json {
				return printJSON(map[string]string{"deleted": args[0]})
			}
			fmt.Printf("deleted schedule %s\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(create, list, del)
	return cmd
}
