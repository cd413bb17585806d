package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// completionCommand is `meshctl completion bash|zsh|fish`: the shell's completion script.
func completionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print the completion script of a shell",
		Long: "Print the script that completes meshctl's commands and flags in bash, zsh or fish.\n\n" +
			"  bash: source <(meshctl completion bash)   (bash-completion 2 needed)\n" +
			"  zsh:  meshctl completion zsh > \"${fpath[1]}/_meshctl\"\n" +
			"  fish: meshctl completion fish > ~/.config/fish/completions/meshctl.fish",
		Example:   "  source <(meshctl completion bash)",
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args:      usageArgs(cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs)),
		// It needs no gateway: the global flags are not checked.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE: func(cmd *cobra.Command, args []string) error {
			root, out := cmd.Root(), cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			default:
				return root.GenFishCompletion(out, true)
			}
		},
	}
}

// flagError is every command's flag error: one line naming the command (not twice for meshctl
// itself) and, for a value of the wrong type, what the flag takes instead of Go's parser error.
func flagError(cmd *cobra.Command, err error) error {
	var ie *pflag.InvalidValueError
	if errors.As(err, &ie) {
		what := "not allowed"
		switch ie.GetFlag().Value.Type() {
		case "duration":
			what = "not a duration such as 15s or 1m"
		case "bool":
			what = "not true or false"
		case "int":
			what = "not a whole number"
		}
		err = fmt.Errorf("--%s %q is %s", ie.GetFlag().Name, ie.GetValue(), what)
	}
	if !cmd.HasParent() {
		return fmt.Errorf("%v (see %s --help)", err, cmd.CommandPath())
	}
	return fmt.Errorf("%s: %v (see %s --help)", commandName(cmd), err, cmd.CommandPath())
}
