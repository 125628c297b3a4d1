import subprocess, sys
p = subprocess.Popen([sys.executable, "-c", "import sys\nfor i in range(40000): sys.stdout.write('x'*50+'\\n')"], stdout=subprocess.PIPE)
p.wait()
