/* placeholder, replaced below */
#include "fmacros.h"
#include <check.h>
#include "suites.h"
Suite *e2e_suite(void)
{
	return suite_create("e2e");
}
