# Solution of the Calc demo: B6 sums the amounts, saved in the workbook's own format.
from openpyxl import load_workbook

path = "/home/user/expenses.xlsx"
wb = load_workbook(path)
wb["March"]["B6"] = "=SUM(B2:B5)"
wb.save(path)
